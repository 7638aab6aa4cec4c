"""Session-wide fixtures (real components started once per test session) and the tier markers.

Every test gets one tier marker from its folder, so ``-m unit`` selects what needs neither Node nor a
running service (``make check``) and ``make test`` runs them all:
- ``tests/unit/``: ``unit``; ``tests/integration/`` and ``tests/infra/`` (the Pulumi engine in-process,
  minutes): ``integration``; ``tests/e2e/``: ``e2e``;
- ``tests/contract/`` runs each case against the shipped fakes (``unit``) and against Azurite
  (``integration``): the parameter carries its own marker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from local.azurite import Azurite, start_azurite

TIERS = ("unit", "integration", "e2e")
_FOLDER_TIERS = {"unit": "unit", "integration": "integration", "infra": "integration", "e2e": "e2e"}
_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue  # set by the test itself (a contract case's parameter)
        parts = Path(item.path).relative_to(_TESTS).parts if Path(item.path).is_relative_to(_TESTS) else ()
        item.add_marker(_FOLDER_TIERS.get(parts[0] if parts else "", "integration"))


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """A real Azurite on free loopback ports with a throwaway data folder."""
    with start_azurite() as running:
        yield running


@pytest.fixture(scope="session")
def storage_connection_string(azurite: Azurite) -> str:
    return azurite.connection_string
