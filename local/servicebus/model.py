"""What the broker's parts share about messages: entries, states and the errors the service would
return. The interfaces a queue talks through (Consumer, Router) live in ``queue``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from local.servicebus.message import AmqpMessage

ACTIVE, DEFERRED, SCHEDULED = 0, 1, 2


def now_ms() -> int:
    return int(time.time() * 1000)


class BrokerError(Exception):
    """An operation the service would refuse; ``condition`` is the AMQP error condition."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


@dataclass
class Entry:
    seq: int
    message: AmqpMessage
    enqueued_ms: int
    expires_ms: int | None = None
    state: int = ACTIVE
    scheduled_ms: int | None = None
    delivery_count: int = 0
    session_id: str | None = None
    dead_letter_source: str | None = None
    lock_token: uuid.UUID | None = None
    locked_until_ms: int = 0
    # The queue's Consumer holding the lock (queue.py); only compared by identity here.
    owner: object | None = field(default=None, repr=False)
