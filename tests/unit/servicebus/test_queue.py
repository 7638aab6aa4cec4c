"""One entity's message logic (locks, delivery counts, expiry, schedule, sessions) without a network."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from servicebus_emulator.config import QueueSettings
from servicebus_emulator.message import AmqpMessage
from servicebus_emulator.model import SCHEDULED, BrokerError, Entry, now_ms
from servicebus_emulator.queue import MessageQueue


@dataclass
class FakeConsumer:
    """A receiver with unlimited credit that records what it got."""

    session_id: str | None = None
    receive_and_delete: bool = False
    credit: int = 1000
    got: list[tuple[Entry, uuid.UUID | None]] = field(default_factory=list)
    lost: bool = False

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None:
        self.got.append((entry, lock_token))

    def session_lost(self) -> None:
        self.lost = True

    def entity_deleted(self) -> None:
        self.lost = True


@dataclass
class FakeRouter:
    dead: list[tuple[str, str]] = field(default_factory=list)

    def dead_letter(self, queue: MessageQueue, entry: Entry, reason: str, description: str) -> None:
        self.dead.append((reason, str(entry.message.message_id)))

    def persist(self, queue: MessageQueue, entry: Entry) -> None:
        """Nothing to store in these tests."""

    def update(self, queue: MessageQueue, entry: Entry) -> None:
        """Nothing to store in these tests."""

    def forget(self, queue: MessageQueue, seq: int) -> None:
        """Nothing to store in these tests."""

    def save_session_state(self, queue: MessageQueue, session_id: str, state: bytes | None) -> None:
        """Nothing to store in these tests."""


def _queue(**settings: object) -> tuple[MessageQueue, FakeRouter]:
    router = FakeRouter()
    return MessageQueue("q", "q", QueueSettings(**settings), router), router  # type: ignore[arg-type]


def _add(
    queue: MessageQueue,
    message_id: str,
    *,
    session: str | None = None,
    ttl_ms: int | None = None,
    scheduled_ms: int | None = None,
) -> Entry:
    properties: dict[str, object] = {"message_id": message_id}
    if session is not None:
        properties["group_id"] = session
    entry = queue.new_entry(AmqpMessage(properties=properties), ttl_ms, scheduled_ms)
    queue.add(entry)
    return entry


def test_delivers_in_sequence_order_with_a_lock_each() -> None:
    """Peek-lock hands out messages by sequence number, each with its own lock token."""
    queue, _ = _queue()
    for name in ("a", "b", "c"):
        _add(queue, name)
    consumer = FakeConsumer()
    queue.attach(consumer)
    queue.pump()
    assert [entry.message.message_id for entry, _ in consumer.got] == ["a", "b", "c"]
    assert len({token for _, token in consumer.got}) == 3


def test_abandon_counts_and_max_delivery_dead_letters() -> None:
    """Each abandon counts a delivery; the MaxDeliveryCount-th failure goes to the router's DLQ."""
    queue, router = _queue(max_delivery_count=2)
    _add(queue, "m")
    consumer = FakeConsumer(credit=1)
    queue.attach(consumer)
    queue.pump()
    queue.abandon(consumer.got[-1][1])  # type: ignore[arg-type]
    queue.pump()
    assert consumer.got[-1][0].delivery_count == 2
    queue.abandon(consumer.got[-1][1])  # type: ignore[arg-type]
    assert router.dead == [("MaxDeliveryCountExceeded", "m")]
    assert queue.entries == {}


def test_release_does_not_count_as_a_delivery() -> None:
    """A released message (prefetched, given back unseen) keeps its delivery count."""
    queue, _ = _queue()
    _add(queue, "m")
    consumer = FakeConsumer(credit=1)
    queue.attach(consumer)
    queue.pump()
    consumer.credit = 0
    queue.release(consumer.got[-1][1])  # type: ignore[arg-type]
    assert next(iter(queue.entries.values())).delivery_count == 0


def test_expired_lock_is_redelivered_and_its_token_is_lost() -> None:
    """After the lock duration the timer returns the message; the old token then fails."""
    queue, _ = _queue(lock_duration=timedelta(seconds=1))
    _add(queue, "m")
    first = FakeConsumer(credit=1)
    queue.attach(first)
    queue.pump()
    queue.detach(first)
    queue.tick(now_ms() + 1500)
    second = FakeConsumer()
    queue.attach(second)
    queue.pump()
    assert second.got[0][0].delivery_count == 2
    with pytest.raises(BrokerError, match="lock"):
        queue.complete(first.got[0][1])  # type: ignore[arg-type]


def test_ttl_expiry_dead_letters_or_drops() -> None:
    """An expired message is dead-lettered when the entity says so, otherwise dropped."""
    keeping, router = _queue(dead_lettering_on_expiration=True)
    _add(keeping, "old", ttl_ms=10)
    keeping.tick(now_ms() + 100)
    assert router.dead == [("TTLExpiredException", "old")]
    dropping, router = _queue()
    _add(dropping, "old", ttl_ms=10)
    dropping.tick(now_ms() + 100)
    assert (router.dead, dropping.entries) == ([], {})


def test_scheduled_message_waits_for_its_time() -> None:
    """A scheduled entry is invisible until the timer passes its enqueue time."""
    queue, _ = _queue()
    entry = _add(queue, "later", scheduled_ms=now_ms() + 60_000)
    consumer = FakeConsumer()
    queue.attach(consumer)
    queue.pump()
    assert (entry.state, consumer.got) == (SCHEDULED, [])
    queue.tick(now_ms() + 61_000)
    assert [e.message.message_id for e, _ in consumer.got] == ["later"]


def test_next_available_session_is_the_oldest_unlocked_one() -> None:
    """Next-available picks the unlocked session whose first message is oldest; a named lock is exclusive."""
    queue, _ = _queue(requires_session=True)
    _add(queue, "b1", session="b")
    _add(queue, "a1", session="a")
    holder = FakeConsumer()
    assert queue.lock_session(None, holder) == "b"
    assert queue.lock_session(None, FakeConsumer()) == "a"
    assert queue.lock_session(None, FakeConsumer()) is None
    with pytest.raises(BrokerError, match="cannot be accepted"):
        queue.lock_session("b", FakeConsumer())


def test_session_receiver_gets_only_its_session_in_order() -> None:
    """A session consumer receives its own session's messages, first in first out."""
    queue, _ = _queue(requires_session=True)
    for name, session in (("x1", "x"), ("y1", "y"), ("x2", "x")):
        _add(queue, name, session=session)
    consumer = FakeConsumer()
    consumer.session_id = queue.lock_session("x", consumer)
    queue.attach(consumer)
    queue.pump()
    assert [entry.message.message_id for entry, _ in consumer.got] == ["x1", "x2"]


def test_session_lock_expiry_tells_the_receiver() -> None:
    """When a session lock runs out the owner is told, and the session can be locked again."""
    queue, _ = _queue(requires_session=True, lock_duration=timedelta(seconds=1))
    _add(queue, "s1", session="s")
    owner = FakeConsumer()
    queue.lock_session("s", owner)
    queue.tick(now_ms() + 1500)
    assert owner.lost
    assert queue.lock_session("s", FakeConsumer()) == "s"


def test_receive_and_delete_removes_on_delivery() -> None:
    """A receive-and-delete consumer takes the message out of the entity as it is delivered."""
    queue, _ = _queue()
    _add(queue, "gone")
    consumer = FakeConsumer(receive_and_delete=True)
    queue.attach(consumer)
    queue.pump()
    assert consumer.got[0][1] is None
    assert queue.entries == {}
