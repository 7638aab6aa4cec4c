"""What the broker's parts share about messages: entries, states and the errors the service would
return. The interfaces a queue talks through (Consumer, Router) live in ``queue``."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field

from local.servicebus.message import AmqpMessage

ACTIVE, DEFERRED, SCHEDULED = 0, 1, 2


def now_ms() -> int:
    return int(time.time() * 1000)


_ENTROPY_BLOCK = 4096  # 256 lock tokens


class _LockTokens:
    """Random (version 4) UUIDs for lock tokens, drawn from the OS's CSPRNG a block at a time:
    ``uuid.uuid4()`` makes one ``getrandom`` system call per token, one per delivered message."""

    def __init__(self) -> None:
        self._block = b""
        self._offset = 0

    def next(self) -> uuid.UUID:
        if self._offset >= len(self._block):
            self._block, self._offset = os.urandom(_ENTROPY_BLOCK), 0
        start = self._offset
        self._offset += 16
        return uuid.UUID(bytes=self._block[start : start + 16], version=4)


new_lock_token = _LockTokens().next


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
