"""Session-wide fixtures: real components started once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.azurite import Azurite, start_azurite


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """A real Azurite on free loopback ports with a throwaway data folder."""
    with start_azurite() as running:
        yield running


@pytest.fixture(scope="session")
def storage_connection_string(azurite: Azurite) -> str:
    return azurite.connection_string
