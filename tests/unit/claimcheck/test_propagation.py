"""The pure part of the propagation_exceeded reconciliation entries (claimcheck.propagation)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from claimcheck.propagation import PropagationEntry, entry_row_key, resolved_by, version_of

RAISED = datetime(2026, 1, 1, tzinfo=UTC)


def test_row_keys_round_trip_and_sort_by_version() -> None:
    keys = [entry_row_key(version) for version in (10, 2, 1)]
    assert [version_of(key) for key in keys] == [10, 2, 1]
    assert sorted(keys) == [entry_row_key(1), entry_row_key(2), entry_row_key(10)]
    assert entry_row_key(2) != "workitem"  # never the work-item row of the same partition


def test_no_entry_for_version_zero_and_no_foreign_row_key() -> None:
    with pytest.raises(ValueError, match="version ≥ 1"):
        entry_row_key(0)
    with pytest.raises(ValueError, match="not a propagation entry"):
        version_of("workitem")


@pytest.mark.parametrize(
    ("confirmed", "resolved"), [(None, False), (0, False), (2, False), (3, True), (4, True)]
)
def test_an_entry_is_resolved_only_once_its_version_is_confirmed(
    confirmed: int | None, resolved: bool
) -> None:
    entry = PropagationEntry(work_item_id="wi-1", version=3, raised_at=RAISED)
    assert resolved_by(entry, confirmed) is resolved
