"""Idempotent intake (docs/architecture.md §8): one ``Idempotency-Key`` → at most one accepted write.

The key lives in the idempotency ledger's table, scoped to the authenticated caller and the tenant
(two callers, or one caller for two tenants, never share a key). Its row records a fingerprint of
what was sent (document sha256 and the request's metadata) and, once the write is accepted, its
receipt:

- first use: an in-progress row is inserted (conditional insert: of two concurrent requests with the
  same key exactly one writes), the write runs, the row becomes ``completed`` with the receipt;
- same key, same fingerprint, completed → the original receipt (no second object, no second message);
- same key, other fingerprint → ``IdempotencyKeyReused`` (409);
- same key while the first request runs → ``RequestInProgress`` (409 with Retry-After);
- a failed write removes its row, so the caller's retry with the same key runs again;
- a row past its window (``Settings.idempotency_window_seconds``) or an in-progress row whose lease
  ran out (a crashed request) is taken over with an ETag-conditional replace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from claimcheck.errors import ConcurrencyConflict, IdempotencyKeyReused, RecordExists, RequestInProgress
from claimcheck.receipts import IntakeReceipt
from claimcheck.storage import EntityTable, Key

_ROW = "intake-key"
_IN_PROGRESS = "in_progress"
_COMPLETED = "completed"
# Printable ASCII, as RFC 8941 strings; long enough for a UUID or a hash, short enough for a header.
MAX_KEY_LENGTH = 255
# How long a running first request holds its key: longer than any intake can run (the Functions
# host's timeout), so only a crashed request's key is ever taken over.
INTAKE_LEASE = timedelta(minutes=10)


def intake_key_id(scope: str, tenant_id: str, key: str) -> str:
    """The ledger row of ``key`` for this caller and tenant (hashed: keys never reach storage as sent)."""
    return hashlib.sha256(f"intake\x1f{scope}\x1f{tenant_id}\x1f{key}".encode()).hexdigest()


def upload_commit_key_id(scope: str, tenant_id: str, upload_id: str) -> str:
    """The ledger row every commit of one direct upload shares, with or without an Idempotency-Key, so
    that one upload is at most one document (its own prefix: no Idempotency-Key can name this row)."""
    return hashlib.sha256(f"upload-commit\x1f{scope}\x1f{tenant_id}\x1f{upload_id}".encode()).hexdigest()


# Trace context says where a request sits in a trace, not what it sends: an instrumented client sends each
# attempt in its own span, so the retry of the same content carries another traceparent (and tracestate).
TRACE_CONTEXT_FIELDS = frozenset({"traceparent", "tracestate"})


def fingerprint(document: bytes, fields: Mapping[str, Any], content_type: str) -> str:
    """What "the same content" means: the document bytes and every metadata field of the request but its
    trace context."""
    described_fields = {name: value for name, value in fields.items() if name not in TRACE_CONTEXT_FIELDS}
    described = json.dumps({"content_type": content_type, **described_fields}, sort_keys=True, default=str)
    return hashlib.sha256(hashlib.sha256(document).digest() + described.encode()).hexdigest()


def check_idempotency_key(raw: str) -> str:
    """The key itself if it is 1-255 printable ASCII characters; ``ValueError`` naming the rule."""
    if not 0 < len(raw) <= MAX_KEY_LENGTH or not all(" " < char <= "~" for char in raw):
        raise ValueError(f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable ASCII characters")
    return raw


@dataclass(frozen=True)
class Replayed:
    """The receipt of the write this key already made."""

    receipt: IntakeReceipt


class IntakeKeys:
    def __init__(
        self,
        table: EntityTable,
        *,
        window: timedelta,
        lease: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        self._table = table
        self._window = window
        self._lease = lease
        self._clock = clock

    def once(self, key_id: str, sent: str, write: Callable[[], IntakeReceipt]) -> tuple[IntakeReceipt, bool]:
        """``write()``'s receipt, run only if this key has not written yet; (receipt, replayed)."""
        now = self._clock()
        row = {
            "status": _IN_PROGRESS,
            "fingerprint": sent,
            "expires_at": now + self._lease,
            "receipt": "",
        }
        try:
            etag = self._table.insert_if_absent(Key(key_id, _ROW), row)
        except RecordExists:
            taken = self._take_over_or_replay(key_id, sent, row, now)
            if isinstance(taken, Replayed):
                return taken.receipt, True
            etag = taken
        try:
            receipt = write()
        except BaseException:
            # The write did not happen (or is not confirmed): the caller's retry must run it again.
            with contextlib.suppress(ConcurrencyConflict):
                self._table.delete_if_match(Key(key_id, _ROW), etag)
            raise
        completed = {
            **row,
            "status": _COMPLETED,
            "expires_at": self._clock() + self._window,
            "receipt": json.dumps(receipt.to_dict(), sort_keys=True),
        }
        # Lost only if this request outlived its lease and another took the key over; our write stands.
        with contextlib.suppress(ConcurrencyConflict):
            self._table.replace_if_match(Key(key_id, _ROW), completed, etag)
        return receipt, False

    def _take_over_or_replay(
        self, key_id: str, sent: str, row: Mapping[str, Any], now: datetime
    ) -> str | Replayed:
        stored = self._table.get(Key(key_id, _ROW))
        if stored is None:  # removed by a failed first request between our insert and read
            raise RequestInProgress("the first request with this Idempotency-Key just ended; retry")
        values = stored.values
        live = values["expires_at"] > now
        if live and values["fingerprint"] != sent:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was used for other content or metadata; use a new key"
            )
        if live and values["status"] == _COMPLETED:
            return Replayed(IntakeReceipt.from_dict(json.loads(values["receipt"])))
        if live:
            raise RequestInProgress("the first request with this Idempotency-Key is still running")
        try:  # expired window, or a crashed request's lease: this request starts afresh
            return self._table.replace_if_match(Key(key_id, _ROW), row, stored.etag)
        except ConcurrencyConflict as exc:
            raise RequestInProgress("another request with this Idempotency-Key started first") from exc
