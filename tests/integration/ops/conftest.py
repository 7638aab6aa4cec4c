"""One embedded Service Bus emulator for the ops CLI tests that share its entities."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.ops.emulator import running_emulator


@pytest.fixture(scope="session")
def servicebus_connection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Connection string of an emulator serving `documents` (sessions) and `results` (audit, replays).

    Tests share it, so each one works on its own session id and message ids, never on totals.
    """
    with running_emulator(tmp_path_factory.mktemp("ops-emulator")) as emulator:
        yield emulator.connection
