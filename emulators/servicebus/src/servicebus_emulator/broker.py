"""The namespace: entities from the config, sending (sessions, duplicate detection, TTL, scheduling,
topic fan-out, forwarding), dead-lettering, timers and runtime counts.

Single-threaded by design: every method runs on the server's asyncio loop.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from servicebus_emulator.amqp_types import Symbol, Timestamp
from servicebus_emulator.codec import encode, long, timestamp
from servicebus_emulator.config import NamespaceConfig, QueueSettings, TopicSettings
from servicebus_emulator.filters import Rule
from servicebus_emulator.managed import replay, rule_json, settings_json
from servicebus_emulator.message import AmqpMessage
from servicebus_emulator.model import ACTIVE, SCHEDULED, BrokerError, Entry, now_ms
from servicebus_emulator.queue import MessageQueue
from servicebus_emulator.routing import apply_rules, filter_view
from servicebus_emulator.store import Store

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
MAX_FORWARD_HOPS = 4  # Azure refuses longer ForwardTo chains
_PURGE_BACKLOG = 256  # settled messages deleted from the store in bulk (and at least once a second)


@dataclass
class Subscription:
    queue: MessageQueue
    rules: tuple[Rule, ...]


@dataclass
class Topic:
    name: str
    settings: TopicSettings
    scheduled: MessageQueue  # scheduled messages wait here, then fan out
    subscriptions: list[Subscription] = field(default_factory=list)


class _TopicRelease:
    """Consumer of a topic's scheduled queue: each message that comes due fans out to subscriptions."""

    session_id: str | None = None
    receive_and_delete = True

    def __init__(self, broker: Broker, topic: Topic) -> None:
        self.broker, self.topic = broker, topic
        self.credit = 1 << 30

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None:
        self.broker.fan_out(self.topic, entry.message, hops=0)

    def session_lost(self) -> None:
        """A topic's scheduled queue has no sessions."""

    def entity_deleted(self) -> None:
        """Deleted with its topic."""


def _dead_letter_settings(settings: QueueSettings) -> QueueSettings:
    # A dead-letter queue never expires, forwards or dead-letters its messages again.
    return QueueSettings(lock_duration=settings.lock_duration, max_delivery_count=1 << 31)


def canonical(address: str) -> str:
    """An entity path from a link address: no scheme/host, lower-case (entity names are case-insensitive)."""
    path = address
    if "://" in path:
        path = path.split("://", 1)[1]
        path = path.split("/", 1)[1] if "/" in path else ""
    return path.strip("/").lower()


class Broker:
    """All entities of one namespace, restored from and persisted to ``store``."""

    def __init__(
        self,
        config: NamespaceConfig,
        store: Store,
        *,
        max_message_size: int = 256 * 1024,
        max_messages_per_entity: int | None = None,
        premium: bool = False,
    ) -> None:
        self.store = store
        self.namespace = config.name
        self.premium = premium  # entities may have their own message size (up to 100 MB)
        self.max_message_size = max_message_size
        self.max_messages_per_entity = max_messages_per_entity
        self.queues: dict[str, MessageQueue] = {}
        self.topics: dict[str, Topic] = {}
        self.duplicates: dict[str, dict[str, int]] = {}
        self._seq_dirty: set[MessageQueue] = set()
        self._next_duplicate_purge_ms = 0
        for name, settings in config.queues.items():
            self._add_queue(name, settings)
        for topic_config in config.topics:
            topic = self._add_topic(topic_config.name, topic_config.settings)
            for sub in topic_config.subscriptions:
                self._add_subscription(topic, sub.name, sub.settings, sub.rules)
        store.forget_message_ids(now_ms())
        for entity in [*config.queues, *(topic.name for topic in config.topics)]:
            self.duplicates[entity.lower()] = store.message_ids(entity.lower())
        store.commit()
        # Then what the management plane created, changed or deleted since (it outlives a restart).
        replay(self, store.managed_changes())

    def _add_topic(self, name: str, settings: TopicSettings) -> Topic:
        scheduled = self._add_queue(f"{name}/$scheduled", QueueSettings(), dead_letter=False)
        topic = Topic(name, settings, scheduled)
        self.topics[name.lower()] = topic
        scheduled.attach(_TopicRelease(self, topic))
        return topic

    def _add_subscription(
        self, topic: Topic, name: str, settings: QueueSettings, rules: tuple[Rule, ...]
    ) -> Subscription:
        subscription = Subscription(self._add_queue(f"{topic.name}/Subscriptions/{name}", settings), rules)
        topic.subscriptions.append(subscription)
        return subscription

    # --- entity management (the management plane; each change is stored before it is answered) ------

    def subscription(self, topic: str, name: str) -> Subscription | None:
        found = self.topics.get(topic.lower())
        path = f"{topic}/subscriptions/{name}".lower()
        return next((sub for sub in found.subscriptions if sub.queue.path == path), None) if found else None

    def put_queue(self, name: str, settings: QueueSettings) -> MessageQueue:
        """Create the queue, or give an existing one new settings (its messages stay)."""
        queue = self.queues.get(name.lower())
        if queue is None:
            queue = self._add_queue(name, settings)
            self.duplicates[queue.path] = {}
        else:
            self._configure(queue, settings)
        self.store.record_entity(
            queue.path, {"kind": "queue", "name": name, "settings": settings_json(settings)}
        )
        return queue

    def put_topic(self, name: str, settings: TopicSettings) -> Topic:
        topic = self.topics.get(name.lower())
        if topic is None:
            topic = self._add_topic(name, settings)
            self.duplicates[name.lower()] = {}
        else:
            topic.settings = settings
        self.store.record_entity(
            name.lower(), {"kind": "topic", "name": name, "settings": settings_json(settings)}
        )
        return topic

    def put_subscription(
        self, topic_name: str, name: str, settings: QueueSettings, rules: tuple[Rule, ...]
    ) -> Subscription:
        """Create the subscription with ``rules``, or give an existing one new settings (rules kept)."""
        topic = self.topics[topic_name.lower()]
        subscription = self.subscription(topic_name, name)
        created = subscription is None
        if subscription is None:
            subscription = self._add_subscription(topic, name, settings, rules)
        else:
            self._configure(subscription.queue, settings)
        self.store.record_entity(
            subscription.queue.path,
            {"kind": "subscription", "topic": topic.name, "name": name, "settings": settings_json(settings)},
        )
        for rule in rules if created else ():  # after their subscription, so a replay finds it
            self._record_rule(topic, name, rule)
        return subscription

    def put_rule(self, topic_name: str, subscription_name: str, rule: Rule) -> None:
        subscription = self.subscription(topic_name, subscription_name)
        assert subscription is not None
        others = tuple(kept for kept in subscription.rules if kept.name.lower() != rule.name.lower())
        replaced = len(others) < len(subscription.rules)
        subscription.rules = (
            tuple(rule if kept.name.lower() == rule.name.lower() else kept for kept in subscription.rules)
            if replaced
            else (*others, rule)
        )
        self._record_rule(self.topics[topic_name.lower()], subscription_name, rule)

    def _record_rule(self, topic: Topic, subscription_name: str, rule: Rule) -> None:
        key = f"{topic.name}/subscriptions/{subscription_name}/rules/{rule.name}".lower()
        document = {
            "kind": "rule",
            "topic": topic.name,
            "subscription": subscription_name,
            "rule": rule_json(rule),
        }
        self.store.record_entity(key, document)

    def delete_rule(self, topic_name: str, subscription_name: str, name: str) -> None:
        subscription = self.subscription(topic_name, subscription_name)
        assert subscription is not None
        subscription.rules = tuple(rule for rule in subscription.rules if rule.name.lower() != name.lower())
        key = f"{topic_name}/subscriptions/{subscription_name}/rules/{name}".lower()
        self.store.record_deletion(
            key, {"kind": "rule", "topic": topic_name, "subscription": subscription_name, "name": name}
        )

    def delete_queue(self, name: str) -> None:
        """Delete the queue, its dead-letter queue and all their messages."""
        queue = self.queues[name.lower()]
        self._drop(queue)
        self.duplicates.pop(queue.path, None)
        self.store.record_deletion(queue.path, {"kind": "queue", "name": name})

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name.lower())
        for subscription in topic.subscriptions:
            self._drop(subscription.queue)
        self._drop(topic.scheduled)
        self.duplicates.pop(name.lower(), None)
        self.store.record_deletion(name.lower(), {"kind": "topic", "name": name})

    def delete_subscription(self, topic_name: str, name: str) -> None:
        subscription = self.subscription(topic_name, name)
        assert subscription is not None
        topic = self.topics[topic_name.lower()]
        topic.subscriptions.remove(subscription)
        self._drop(subscription.queue)
        self.store.record_deletion(
            subscription.queue.path, {"kind": "subscription", "topic": topic.name, "name": name}
        )

    def _configure(self, queue: MessageQueue, settings: QueueSettings) -> None:
        queue.configure(settings)
        dead_letters = self.queues.get(queue.path + DEAD_LETTER_SUFFIX)
        if dead_letters is not None:
            dead_letters.configure(_dead_letter_settings(settings))

    def _drop(self, queue: MessageQueue) -> None:
        """Forget a queue (and its dead-letter queue); receivers attached to it are detached."""
        self.commit()
        for path in (queue.path, queue.path + DEAD_LETTER_SUFFIX):
            dropped = self.queues.pop(path, None)
            if dropped is not None:
                self._seq_dirty.discard(dropped)
                for consumer in list(dropped.consumers):
                    consumer.entity_deleted()
                    dropped.detach(consumer)
        self.store.drop_entity(queue.path)

    def _add_queue(self, name: str, settings: QueueSettings, *, dead_letter: bool = True) -> MessageQueue:
        queue = MessageQueue(name.lower(), name, settings, self)
        queue.next_seq = self.store.next_seq(queue.path)
        for entry in self.store.entries(queue.path):
            queue.add(entry, persist=False)
        queue.session_states = self.store.session_states(queue.path)
        self.queues[queue.path] = queue
        if dead_letter:
            self._add_queue(name + "/$DeadLetterQueue", _dead_letter_settings(settings), dead_letter=False)
        return queue

    # --- Router (called by queues) ---------------------------------------------------------------

    def persist(self, queue: MessageQueue, entry: Entry) -> None:
        self.store.put(queue.path, entry)
        self._seq_dirty.add(queue)

    def update(self, queue: MessageQueue, entry: Entry) -> None:
        self.store.update(queue.path, entry)

    def forget(self, queue: MessageQueue, seq: int) -> None:
        self.store.remove(queue.path, seq)

    def save_session_state(self, queue: MessageQueue, session_id: str, state: bytes | None) -> None:
        self.store.save_session_state(queue.path, session_id, state)

    def dead_letter(self, queue: MessageQueue, entry: Entry, reason: str, description: str) -> None:
        message = entry.message.copy()
        message.application_properties["DeadLetterReason"] = reason
        message.application_properties["DeadLetterErrorDescription"] = description
        message.changed()
        target = queue.settings.forward_dead_lettered_to
        if target is not None:
            self.send(target, [message], hops=1)
            return
        dead_letters = self.queues[queue.path + DEAD_LETTER_SUFFIX]
        moved = Entry(
            seq=entry.seq,
            message=message,
            enqueued_ms=entry.enqueued_ms,
            delivery_count=entry.delivery_count,
            session_id=entry.session_id,
            dead_letter_source=queue.name,
        )
        dead_letters.add(moved)
        dead_letters.pump()

    # --- sending ---------------------------------------------------------------------------------

    def queue_for(self, address: str) -> MessageQueue:
        """The queue, subscription or dead-letter queue a receiver reads from."""
        queue = self.queues.get(canonical(address))
        if queue is None or queue.path.endswith("/$scheduled"):
            raise BrokerError("amqp:not-found", f"The messaging entity '{address}' could not be found.")
        return queue

    def max_message_size_of(self, address: str) -> int:
        """The largest message a sender to ``address`` may send: the entity's limit, else the namespace's."""
        path = canonical(address)
        queue, topic = self.queues.get(path), self.topics.get(path)
        settings = queue.settings if queue is not None else topic.settings if topic is not None else None
        own = settings.max_message_size_kb if settings is not None else None
        return self.max_message_size if own is None else own * 1024

    def check_send_target(self, address: str) -> str:
        path = canonical(address)
        if path in self.topics or (path in self.queues and "/" not in path):
            return path
        if path in self.queues:
            raise BrokerError("amqp:not-allowed", f"Cannot send to '{address}': it is not a queue or topic.")
        raise BrokerError("amqp:not-found", f"The messaging entity '{address}' could not be found.")

    def send(self, entity: str, messages: list[AmqpMessage], *, hops: int = 0) -> list[int]:
        """Accept messages for a queue or topic; return their sequence numbers (0 for a topic copy)."""
        path = self.check_send_target(entity)
        queue = self.queues.get(path)
        if queue is not None and queue.settings.requires_session:
            for message in messages:
                if message.session_id is None:
                    raise BrokerError(
                        "amqp:not-allowed",
                        "The SessionId was not set on a message, and it cannot be sent to the entity. "
                        "Entities that have session support enabled can only receive messages that have "
                        "the SessionId set to a valid value.",
                    )
        if queue is not None:
            self._check_quota(queue, len(messages))
        for message in messages:
            if message.message_id is None:
                assign_message_id(message)
        numbers = []
        for message in messages:
            if self._is_duplicate(path, message):
                numbers.append(0)
                continue
            if queue is not None:
                numbers.append(self._enqueue(queue, message, hops))
            else:
                numbers.append(self._send_to_topic(self.topics[path], message, hops))
        return numbers

    def _check_quota(self, queue: MessageQueue, adding: int) -> None:
        limit = self.max_messages_per_entity
        if limit is not None and len(queue.entries) + adding > limit:
            raise BrokerError(
                "amqp:resource-limit-exceeded",
                f"The maximum entity size has been reached or exceeded for '{queue.name}' "
                f"({limit} messages).",
            )

    def _is_duplicate(self, path: str, message: AmqpMessage) -> bool:
        queue = self.queues.get(path)
        settings: QueueSettings | TopicSettings = queue.settings if queue else self.topics[path].settings
        if not settings.requires_duplicate_detection or message.message_id is None:
            return False
        seen = self.duplicates.setdefault(path, {})
        now = now_ms()
        if seen.get(message.message_id, 0) > now:
            return True
        expires = now + int(settings.duplicate_window.total_seconds() * 1000)
        seen[message.message_id] = expires
        self.store.remember_message_id(path, message.message_id, expires)
        return False

    @staticmethod
    def _ttl_ms(message: AmqpMessage, default: timedelta | None) -> int | None:
        ttl = message.ttl_ms
        limit = None if default is None else int(default.total_seconds() * 1000)
        if ttl is None:
            return limit
        return ttl if limit is None else min(ttl, limit)

    @staticmethod
    def _scheduled_ms(message: AmqpMessage) -> int | None:
        value = message.annotation("x-opt-scheduled-enqueue-time")
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        return int(value) if isinstance(value, int) and value > 0 else None

    def _enqueue(self, queue: MessageQueue, message: AmqpMessage, hops: int) -> int:
        target = queue.settings.forward_to
        if target is not None and hops < MAX_FORWARD_HOPS:
            self.send(target, [message], hops=hops + 1)
            return 0
        entry = queue.new_entry(
            message, self._ttl_ms(message, queue.settings.default_ttl), self._scheduled_ms(message)
        )
        queue.add(entry)
        queue.pump()
        return entry.seq

    def _send_to_topic(self, topic: Topic, message: AmqpMessage, hops: int) -> int:
        scheduled = self._scheduled_ms(message)
        if scheduled is not None and scheduled > now_ms():
            entry = topic.scheduled.new_entry(message, None, scheduled)
            topic.scheduled.add(entry)
            return entry.seq
        self.fan_out(topic, message, hops)
        return 0

    def fan_out(self, topic: Topic, message: AmqpMessage, hops: int) -> None:
        """Copy ``message`` to every subscription with a matching rule."""
        if message.annotations.pop(Symbol("x-opt-scheduled-enqueue-time"), None) is not None:
            message.changed()
        view = filter_view(message, sequence_number=0, enqueued_ms=now_ms(), size=len(message.body))
        for sub in topic.subscriptions:
            copy = apply_rules(sub.rules, message, view)
            if copy is None:
                continue
            if sub.queue.settings.requires_session and copy.session_id is None:
                entry = sub.queue.new_entry(copy, None)
                self.dead_letter(
                    sub.queue,
                    entry,
                    "Session id is null.",
                    "Session enabled entity doesn't allow a message whose session identifier is null.",
                )
                continue
            ttl = self._ttl_ms(
                copy,
                min(
                    (
                        d
                        for d in (topic.settings.default_ttl, sub.queue.settings.default_ttl)
                        if d is not None
                    ),
                    default=None,
                ),
            )
            target = sub.queue.settings.forward_to
            if target is not None and hops < MAX_FORWARD_HOPS:
                self.send(target, [copy], hops=hops + 1)
                continue
            sub.queue.add(sub.queue.new_entry(copy, ttl))
            sub.queue.pump()

    def cancel_scheduled(self, entity: str, numbers: list[int]) -> None:
        path = self.check_send_target(entity)
        queue = self.topics[path].scheduled if path in self.topics else self.queues[path]
        for seq in numbers:
            queue.cancel_scheduled(seq)

    # --- time and durability ---------------------------------------------------------------------

    def tick(self) -> None:
        """Run every queue's timers (locks, TTL, schedule); called periodically by the server."""
        now = now_ms()
        for queue in list(self.queues.values()):
            if queue.locks or queue.session_locks or queue.schedule or queue.expiries:
                queue.tick(now)
        if self.store.removed_backlog >= _PURGE_BACKLOG or (
            self.store.removed_backlog and now >= self._next_duplicate_purge_ms
        ):
            self.store.purge_removed()
        if now >= self._next_duplicate_purge_ms:  # once a second is plenty for windows of 20 s and more
            self._next_duplicate_purge_ms = now + 1000
            for seen in self.duplicates.values():
                for message_id in [key for key, expires in seen.items() if expires <= now]:
                    del seen[message_id]
            self.store.forget_message_ids(now)

    def commit(self) -> None:
        """Durably store everything done so far; call before acknowledging it to a client."""
        for queue in self._seq_dirty:
            self.store.save_next_seq(queue.path, queue.next_seq)
        self._seq_dirty.clear()
        self.store.commit()

    def runtime_properties(self, entity: str) -> dict[str, Any]:
        """Counts for ops and tests: active, dead-lettered, scheduled, deferred, oldest message age."""
        queue = self.queue_for(entity)
        counts = queue.counts()
        dead = self.queues.get(queue.path + DEAD_LETTER_SUFFIX)
        oldest = min((e.enqueued_ms for e in queue.entries.values() if e.state == ACTIVE), default=None)
        return {
            "name": queue.name,
            "active_message_count": counts["active"],
            "scheduled_message_count": counts["scheduled"],
            "deferred_message_count": counts["deferred"],
            "dead_letter_message_count": len(dead.entries) if dead else 0,
            "oldest_message_age_seconds": None if oldest is None else (now_ms() - oldest) / 1000,
            "locked_message_count": len(queue.locks),
        }


def assign_message_id(message: AmqpMessage) -> None:
    """Give a message sent without an id one, as the service does: a GUID as 32 hex digits
    (.NET's "N" format), so duplicate detection and clients that need an id have one."""
    message.properties["message_id"] = uuid.uuid4().hex
    message.changed()


def delivery_annotations(entry: Entry, queue: MessageQueue) -> dict[Any, Any]:
    """The broker's message annotations on a delivered or peeked message of ``queue``."""
    annotations: dict[Any, Any] = {
        Symbol("x-opt-sequence-number"): entry.seq,
        Symbol("x-opt-enqueued-time"): Timestamp(entry.enqueued_ms),
    }
    if entry.lock_token is not None:
        annotations[Symbol("x-opt-locked-until")] = Timestamp(queue.lock_deadline(entry))
    if entry.state != ACTIVE:
        annotations[Symbol("x-opt-message-state")] = entry.state
    if entry.state == SCHEDULED and entry.scheduled_ms:
        annotations[Symbol("x-opt-scheduled-enqueue-time")] = Timestamp(entry.scheduled_ms)
    if entry.dead_letter_source:
        annotations[Symbol("x-opt-deadletter-source")] = entry.dead_letter_source
    return annotations


_SEQUENCE_NUMBER = encode(Symbol("x-opt-sequence-number"))
_ENQUEUED_TIME = encode(Symbol("x-opt-enqueued-time"))
_LOCKED_UNTIL = encode(Symbol("x-opt-locked-until"))
_FAST_KEYS = tuple(
    Symbol(name) for name in ("x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until")
)


def encode_delivery(entry: Entry, queue: MessageQueue) -> bytes:
    """The message as a receiver sees it: header delivery-count = earlier attempts (the service
    puts DeliveryCount - 1 on the wire), broker annotations."""
    delivery_count = max(entry.delivery_count - 1, 0)
    message = entry.message
    if (
        entry.state == ACTIVE
        and not entry.dead_letter_source
        and not (message.annotations and any(key in message.annotations for key in _FAST_KEYS))
    ):
        # The steady state: annotations encoded directly, byte for byte what the general path writes.
        extra = _SEQUENCE_NUMBER + long(entry.seq) + _ENQUEUED_TIME + timestamp(entry.enqueued_ms)
        if entry.lock_token is None:
            return message.encode_delivery(delivery_count, extra, 4)
        extra += _LOCKED_UNTIL + timestamp(queue.lock_deadline(entry))
        return message.encode_delivery(delivery_count, extra, 6)
    return message.encode(delivery_count=delivery_count, annotations=delivery_annotations(entry, queue))
