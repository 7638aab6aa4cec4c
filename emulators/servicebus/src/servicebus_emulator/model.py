"""What the broker's parts share about messages: entries, states and the errors the service would
return. The interfaces a queue talks through (Consumer, Router) live in ``queue``."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field

from servicebus_emulator.message import AmqpMessage

ACTIVE, DEFERRED, SCHEDULED = 0, 1, 2


def now_ms() -> int:
    return int(time.time() * 1000)


_ENTROPY_BLOCK = 4096  # 256 lock tokens


class LockToken(uuid.UUID):
    """A lock token that keeps the delivery tag it travels as: its ``bytes_le``, from which the
    SDK rebuilds the token. Equal to (and hashed as) the plain ``uuid.UUID`` of the same value."""

    __slots__ = ("delivery_tag",)
    delivery_tag: bytes


class _LockTokens:
    """Random (version 4) lock tokens, drawn from the OS's CSPRNG a block at a time
    (``uuid.uuid4()`` makes one ``getrandom`` system call per token, one per delivered message)."""

    def __init__(self) -> None:
        self._block = b""
        self._offset = 0

    def _refill(self) -> None:
        block = bytearray(os.urandom(_ENTROPY_BLOCK))
        # In each 16-byte tag (a UUID's bytes_le), byte 7 holds the version nibble and byte 8 the
        # variant bits: version 4, RFC 4122 variant, as uuid4() sets them.
        block[7::16] = bytes((byte & 0x0F) | 0x40 for byte in block[7::16])
        block[8::16] = bytes((byte & 0x3F) | 0x80 for byte in block[8::16])
        self._block, self._offset = bytes(block), 0

    def next(self) -> LockToken:
        if self._offset >= len(self._block):
            self._refill()
        tag = self._block[self._offset : self._offset + 16]
        self._offset += 16
        token = LockToken(bytes_le=tag)
        object.__setattr__(token, "delivery_tag", tag)  # a UUID refuses attribute assignment
        return token


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
