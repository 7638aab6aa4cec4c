"""The delivery number of a message whose trigger does not report it.

On Azure the Functions host hands the Python worker the message as binding data, and the Service Bus
binding extension (1.0.0b2) decodes it without the AMQP header, so ``delivery_count`` is unknown (see
local/functions_host/README.md). The consumer needs the number only to choose a retry's backoff and
to give up with its own reason on the last delivery, so the count is kept here and consulted only
then: a delivery that succeeds (or is rejected) never touches it, nor does any delivery whose
trigger reports the broker's count.

Each row counts the deliveries of one message (message id + sequence number, so a replayed copy
starts again) that reached a retry decision; increments are ETag-conditional and idempotent per
delivery (its lock token), so two decisions about one delivery, or two racing consumers, never
count twice or lose a count. A delivery that crashed before deciding is not counted: the broker's
own MaxDeliveryCountExceeded still bounds those.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

from claimcheck.errors import ConcurrencyConflict, RecordExists, RecordNotFound
from claimcheck.storage import EntityTable, Key

_ROW = "deliveries"
_CONFLICT_RETRIES = 32  # each lost race means another delivery was counted: progress, not a loop


def delivery_number(reported: int | None, count: Callable[[], int]) -> int:
    """The broker's number when the trigger reports it (no storage call), else the app's own count."""
    return reported if reported is not None else count()


def attempts_key(message_id: str, sequence_number: int | None) -> str:
    return hashlib.sha256(f"delivery\x1f{message_id}\x1f{sequence_number}".encode()).hexdigest()


class DeliveryCounter:
    """Counts a message's deliveries in a table (the idempotency table: one row per message)."""

    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def count(
        self, message_id: str, sequence_number: int | None, delivery: str | None, *, now: datetime
    ) -> int:
        """Count this delivery (``delivery``: its lock token) once and answer its number, 1 for the first."""
        key = Key(attempts_key(message_id, sequence_number), _ROW)
        for _ in range(_CONFLICT_RETRIES):
            stored = self._table.get(key)
            if stored is None:
                try:
                    self._table.insert_if_absent(key, _row(1, delivery, now))
                    return 1
                except RecordExists:
                    continue  # another consumer counted first: count on top of it
            counted = int(stored.values["count"])
            if delivery is not None and stored.values.get("last_delivery") == delivery:
                return counted  # this delivery is already counted
            try:
                self._table.replace_if_match(key, _row(counted + 1, delivery, now), stored.etag)
                return counted + 1
            except (ConcurrencyConflict, RecordNotFound):
                continue
        raise ConcurrencyConflict("the delivery count kept changing under us")


def _row(count: int, delivery: str | None, now: datetime) -> dict[str, object]:
    return {
        "count": count,
        "last_delivery": delivery or "",
        "updated_at": now,
    }
