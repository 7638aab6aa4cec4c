"""What the broker's parts share about messages: entries, states, the errors the service would
return, and the two interfaces a queue talks through (its consumers and its router)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from local.servicebus.message import AmqpMessage

if TYPE_CHECKING:
    from local.servicebus.queue import MessageQueue

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
    owner: Consumer | None = field(default=None, repr=False)


class Consumer(Protocol):
    """A receiver link as the queue sees it."""

    session_id: str | None
    receive_and_delete: bool

    @property
    def credit(self) -> int: ...

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None: ...

    def session_lost(self) -> None: ...


class Router(Protocol):
    def dead_letter(self, queue: MessageQueue, entry: Entry, reason: str, description: str) -> None: ...

    def persist(self, queue: MessageQueue, entry: Entry) -> None: ...

    def update(self, queue: MessageQueue, entry: Entry) -> None: ...

    def forget(self, queue: MessageQueue, seq: int) -> None: ...

    def save_session_state(self, queue: MessageQueue, session_id: str, state: bytes | None) -> None: ...


@dataclass
class SessionLock:
    owner: Consumer
    until_ms: int
