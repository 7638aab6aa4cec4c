"""Dead-letter counts and oldest age per entity, for the reconciler's report and alert lines.

The port (``DeadLetterSource``) is read by the reconciler; the adapter (claimcheck.adapters.busadmin)
reads the broker's management plane (runtime properties: exact counts) and peeks the dead-letter
subqueue's first message for its age, on Azure and on the local emulator alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


@dataclass(frozen=True)
class DeadLetterCount:
    """Dead-lettered messages of one entity (a queue, or ``topic/subscription``)."""

    entity: str
    count: int
    oldest_enqueued_at: datetime | None  # None when the subqueue is empty (or emptied meanwhile)

    def oldest_age(self, now: datetime) -> timedelta | None:
        return None if self.oldest_enqueued_at is None else max(timedelta(0), now - self.oldest_enqueued_at)


class DeadLetterSource(Protocol):
    def dead_letter_counts(self) -> Sequence[DeadLetterCount]: ...


def dead_letter_alerts(counts: Sequence[DeadLetterCount], now: datetime, max_age: timedelta) -> list[str]:
    """One alert line per entity whose oldest dead-lettered message is older than ``max_age``."""
    alerts = []
    for found in counts:
        age = found.oldest_age(now)
        if found.count and age is not None and age > max_age:
            alerts.append(
                f"{found.entity}: {found.count} dead-lettered message(s), the oldest"
                f" {int(age.total_seconds())} s old (alert past {int(max_age.total_seconds())} s);"
                " inspect with claimcheck-ops dlq list"
            )
    return alerts
