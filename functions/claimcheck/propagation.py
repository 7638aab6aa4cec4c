"""Reconciliation entries for versions past their visibility deadline (docs/architecture.md §8,
``propagation_exceeded``).

The first status read that answers ``propagation_exceeded`` for (work item, version) raises one entry;
every later read finds it already there (the row key is the version, so raising is idempotent). Each
reconciler run lists the open entries: one whose version has been confirmed since is resolved (kept,
marked ``resolved``, as the record that it happened); the others are counted and alerted until then.

Entries are rows of the work-items table in the work item's own partition (key: work item id, row
``propagation-exceeded-`` + zero-padded version): no new table, setting or role. The work-item
row itself is row ``workitem`` and has no ``entry_state``, so the entries disturb no reader and the
reconciler's scan by ``entry_state`` finds only entries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from claimcheck.errors import RecordExists
from claimcheck.storage import EntityTable, Key

ROW_PREFIX = "propagation-exceeded-"
OPEN, RESOLVED = "open", "resolved"


@dataclass(frozen=True)
class PropagationEntry:
    work_item_id: str
    version: int
    raised_at: datetime
    etag: str = ""


def entry_row_key(version: int) -> str:
    """Zero-padded, so that the rows of one work item sort by version."""
    if version < 1:
        raise ValueError("a reconciliation entry names a version ≥ 1")
    return f"{ROW_PREFIX}{version:010d}"


def version_of(row_key: str) -> int:
    if not row_key.startswith(ROW_PREFIX):
        raise ValueError(f"{row_key!r} is not a propagation entry's row key")
    return int(row_key[len(ROW_PREFIX) :])


def resolved_by(entry: PropagationEntry, confirmed_version: int | None) -> bool:
    """True once the work item's confirmed version reached the entry's (it propagated late).
    ``None``: the work item is gone (or unreadable) — the entry stays open for an operator."""
    return confirmed_version is not None and confirmed_version >= entry.version


class PropagationEntries:
    """The entries through the table port (the work-items table on Azure and locally)."""

    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def raise_entry(self, work_item_id: str, version: int, *, now: datetime) -> bool:
        """Record the entry; False if it was already raised (by an earlier read)."""
        try:
            self._table.insert_if_absent(
                Key(work_item_id, entry_row_key(version)), {"entry_state": OPEN, "raised_at": now}
            )
        except RecordExists:
            return False
        return True

    def open_entries(self) -> Iterator[PropagationEntry]:
        # Only entry rows carry ``entry_state``; the prefix check keeps that an explicit guarantee.
        for stored in self._table.scan_where("entry_state", [OPEN]):
            if not stored.key.row.startswith(ROW_PREFIX):
                continue
            yield PropagationEntry(
                work_item_id=stored.key.partition,
                version=version_of(stored.key.row),
                raised_at=stored.values["raised_at"],
                etag=stored.etag,
            )

    def get(self, work_item_id: str, version: int) -> tuple[str, datetime] | None:
        """(state, raised_at) of one entry, or None if it was never raised."""
        stored = self._table.get(Key(work_item_id, entry_row_key(version)))
        return None if stored is None else (stored.values["entry_state"], stored.values["raised_at"])

    def resolve(self, entry: PropagationEntry, *, now: datetime) -> None:
        """Mark resolved iff nobody changed the row since it was listed (``ConcurrencyConflict``)."""
        self._table.replace_if_match(
            Key(entry.work_item_id, entry_row_key(entry.version)),
            {
                "entry_state": RESOLVED,
                "raised_at": entry.raised_at,
                "resolved_at": now,
            },
            entry.etag,
        )
