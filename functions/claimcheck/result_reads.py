"""The read side of the results table: one version's full analysis, for ``GET /work-items/{id}/result``.

The consumer writes one row per (work item, version) (``claimcheck.results.result_row``); this reads it
back by key, only for a tenant the caller may see: another tenant's result reads as absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from claimcheck.results import read_result, result_row_key
from claimcheck.storage import EntityTable, Key
from claimcheck.timestamps import format_timestamp


@dataclass(frozen=True)
class StoredResult:
    work_item_id: str
    version: int
    completed_at: datetime | None
    summary: Mapping[str, Any]
    analysis: Mapping[str, Any]  # parties, dates, obligations with pages: never payload bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "work_item_id": self.work_item_id,
            "version": self.version,
            "completed_at": None if self.completed_at is None else format_timestamp(self.completed_at),
            "summary": dict(self.summary),
            "result": dict(self.analysis),
        }


class ResultReader:
    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def get(
        self, work_item_id: str, version: int, *, tenant_visible: Callable[[str], bool]
    ) -> StoredResult | None:
        """The stored result of that version, if it exists and its tenant is one the caller may see."""
        stored = self._table.get(Key(work_item_id, result_row_key(version)))
        if stored is None or not tenant_visible(str(stored.values.get("tenant_id", ""))):
            return None
        row = stored.values
        completed_at = row.get("completed_at")
        return StoredResult(
            work_item_id=work_item_id,
            version=version,
            completed_at=completed_at if isinstance(completed_at, datetime) else None,
            summary=json.loads(str(row.get("summary") or "{}")),
            analysis=read_result(row),
        )
