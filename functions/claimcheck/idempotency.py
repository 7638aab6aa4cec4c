"""Idempotency ledger: at most one effect per (work item, version, purpose, effect).

Layout after Powertools' idempotency utility: the logic (key derivation, in-progress expiry,
completed-record replay) lives here; the table adapter only does conditional insert/replace/delete.

Protocol: ``begin`` inserts an in-progress record (conditional insert, so of two concurrent
consumers exactly one wins). The winner performs the effect and calls ``complete`` (the stored
result is replayed to any later delivery). A crashed attempt's in-progress record expires after
``in_progress_ttl`` and the next delivery takes it over with an ETag-conditional replace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from claimcheck.errors import ConcurrencyConflict, EffectInProgress, RecordExists
from claimcheck.storage import EntityTable

_ROW = "effect"
IN_PROGRESS = "in_progress"
COMPLETED = "completed"


def idempotency_key(work_item_id: str, version: int, purpose: str, effect: str) -> str:
    return hashlib.sha256(f"{work_item_id}\x1f{version}\x1f{purpose}\x1f{effect}".encode()).hexdigest()


@dataclass(frozen=True)
class Claimed:
    """This attempt owns the effect; it must ``complete`` or ``release`` it."""

    key: str
    etag: str


@dataclass(frozen=True)
class AlreadyDone:
    """An earlier attempt completed the effect; here is what it recorded."""

    key: str
    result: Mapping[str, Any]


class IdempotencyLedger:
    def __init__(self, table: EntityTable, *, in_progress_ttl: timedelta) -> None:
        self._table = table
        self._ttl = in_progress_ttl

    def begin(self, key: str, *, now: datetime) -> Claimed | AlreadyDone:
        """Claim the effect, or learn it is done; raise ``EffectInProgress`` if someone holds it."""
        entity = {
            "PartitionKey": key,
            "RowKey": _ROW,
            "status": IN_PROGRESS,
            "expires_at": now + self._ttl,
            "result": "",
        }
        try:
            return Claimed(key, self._table.insert(entity))
        except RecordExists:
            pass
        stored = self._table.get(key, _ROW)
        if stored is None:  # released between our insert and our read: the next delivery claims it
            raise EffectInProgress("the effect record changed under us; retry")
        if stored.values["status"] == COMPLETED:
            return AlreadyDone(key, json.loads(stored.values["result"]))
        if stored.values["expires_at"] > now:
            raise EffectInProgress("another attempt holds this effect")
        try:  # the holder crashed: take over its expired record, unless someone else just did
            return Claimed(key, self._table.replace(entity, stored.etag))
        except ConcurrencyConflict as exc:
            raise EffectInProgress("another attempt took over this effect first") from exc

    def lookup(self, key: str) -> AlreadyDone | None:
        """The completed record of ``key``, if the effect is done (a read; claims nothing)."""
        stored = self._table.get(key, _ROW)
        if stored is None or stored.values["status"] != COMPLETED:
            return None
        return AlreadyDone(key, json.loads(stored.values["result"]))

    def complete(self, claim: Claimed, result: Mapping[str, Any], *, now: datetime) -> None:
        """Record the effect as done with its result; raises ``ConcurrencyConflict`` if we lost it."""
        entity = {
            "PartitionKey": claim.key,
            "RowKey": _ROW,
            "status": COMPLETED,
            "expires_at": now,
            "result": json.dumps(result, sort_keys=True),
        }
        self._table.replace(entity, claim.etag)

    def release(self, claim: Claimed) -> None:
        """Give the effect up (this attempt failed) so the next delivery can claim it at once."""
        # A conflict means someone took it over after our record expired: it is theirs now.
        with contextlib.suppress(ConcurrencyConflict):
            self._table.delete(claim.key, _ROW, claim.etag)
