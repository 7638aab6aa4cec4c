"""A caching status reader: the "cache returning the old object" of the read-after-write seed (case 10).

``CachingWorkItemReader`` sits behind the status read port (``claimcheck.workitems.WorkItemReader``) in
front of the table: it keeps each work-item row it read for ``ttl`` and answers that row meanwhile,
however the table changed. It says it is not authoritative, so ``WorkItemStatus`` confirms from it only
what an old row still proves ("version ≥ N is visible") and answers ``awaiting_visibility`` / ``re_read``
for anything else (``claimcheck.final_states``). Use it to take read load off the table where agents
poll with ``min_version``; the HTTP status route reads the table itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from claimcheck.workitems import WorkItemReader, WorkItemRecord


class CachingWorkItemReader:
    authoritative = False  # its row may be older than the table's

    def __init__(self, source: WorkItemReader, *, ttl: timedelta, clock: Callable[[], datetime]) -> None:
        self._source = source
        self._ttl = ttl
        self._clock = clock
        self._rows: dict[str, tuple[datetime, WorkItemRecord]] = {}
        self._lock = threading.Lock()

    def get(self, work_item_id: str) -> WorkItemRecord | None:
        now = self._clock()
        with self._lock:
            cached = self._rows.get(work_item_id)
        if cached is not None and now < cached[0]:
            return cached[1]
        record = self._source.get(work_item_id)
        with self._lock:
            if record is None:  # an absent row is not kept: the next read asks the table again
                self._rows.pop(work_item_id, None)
            else:
                self._rows[work_item_id] = (now + self._ttl, record)
        return record
