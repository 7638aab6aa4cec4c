"""One message-holding entity (a queue, a subscription, or the dead-letter queue of either).

Holds the entries, the peek-locks and the session locks, and hands available messages to the
consumers (receiver links) that have credit. Knows nothing about AMQP frames or other entities:
dead-lettering and forwarding go through the ``Router`` the broker provides.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from servicebus_emulator.config import QueueSettings
from servicebus_emulator.message import AmqpMessage
from servicebus_emulator.model import (
    ACTIVE,
    DEFERRED,
    SCHEDULED,
    BrokerError,
    Entry,
    new_lock_token,
    now_ms,
)


class Consumer(Protocol):
    """A receiver link as the queue sees it."""

    session_id: str | None
    receive_and_delete: bool

    @property
    def credit(self) -> int: ...

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None: ...

    def session_lost(self) -> None: ...

    def entity_deleted(self) -> None: ...


class Router(Protocol):
    """What the queue asks of the namespace: storing, dead-lettering (to another entity)."""

    def dead_letter(self, queue: MessageQueue, entry: Entry, reason: str, description: str) -> None: ...

    def persist(self, queue: MessageQueue, entry: Entry) -> None: ...

    def update(self, queue: MessageQueue, entry: Entry) -> None: ...

    def forget(self, queue: MessageQueue, seq: int) -> None: ...

    def save_session_state(self, queue: MessageQueue, session_id: str, state: bytes | None) -> None: ...


@dataclass
class SessionLock:
    owner: Consumer
    until_ms: int


def lock_lost() -> BrokerError:
    return BrokerError(
        "com.microsoft:message-lock-lost",
        "The lock supplied is invalid. Either the lock expired, or the message has already been "
        "removed from the queue.",
    )


class MessageQueue:
    """Entries of one entity, its locks and its consumers. All calls happen on the broker's loop."""

    def __init__(self, path: str, name: str, settings: QueueSettings, router: Router) -> None:
        self.path = path  # canonical lower-case address, e.g. "results/subscriptions/audit"
        self.name = name  # display name, e.g. "results/Subscriptions/audit"
        self.settings = settings
        self.router = router
        self.entries: dict[int, Entry] = {}
        self.next_seq = 1
        self.available: dict[str | None, list[int]] = {}
        self.expiries: list[tuple[int, int]] = []
        self.schedule: list[tuple[int, int]] = []
        self.locks: dict[uuid.UUID, Entry] = {}
        self.session_locks: dict[str, SessionLock] = {}
        # No lock ends before this (renewals only extend): the timer skips the scan of locks until then.
        self.locks_checked_until_ms = 0
        self.session_states: dict[str, bytes] = {}
        self.session_state_updated_ms: dict[str, int] = {}  # since this broker started
        self.consumers: list[Consumer] = []
        # Receivers waiting for "next available session": each callback returns True once served.
        self.session_waiters: list[Callable[[], bool]] = []
        self.configure(settings)

    def configure(self, settings: QueueSettings) -> None:
        """New settings (the management plane's update): new locks and sends follow them."""
        self.settings = settings
        self.lock_ms = int(settings.lock_duration.total_seconds() * 1000)

    # --- adding ----------------------------------------------------------------------------------

    def add(self, entry: Entry, *, persist: bool = True) -> None:
        """Store a new entry (its ``seq`` already assigned) and make it available when due."""
        self.entries[entry.seq] = entry
        self.next_seq = max(self.next_seq, entry.seq + 1)
        if persist:
            self.router.persist(self, entry)
        if entry.state == SCHEDULED and entry.scheduled_ms is not None:
            heapq.heappush(self.schedule, (entry.scheduled_ms, entry.seq))
        elif entry.state == ACTIVE:
            self._make_available(entry)

    def new_entry(self, message: AmqpMessage, ttl_ms: int | None, scheduled_ms: int | None = None) -> Entry:
        enqueued = now_ms()
        entry = Entry(
            seq=self.next_seq,
            message=message,
            enqueued_ms=enqueued,
            expires_ms=None if ttl_ms is None else enqueued + ttl_ms,
            session_id=message.session_id,
        )
        if scheduled_ms is not None and scheduled_ms > enqueued:
            entry.state, entry.scheduled_ms = SCHEDULED, scheduled_ms
        self.next_seq += 1
        return entry

    def _make_available(self, entry: Entry) -> None:
        key = entry.session_id if self.settings.requires_session else None
        heapq.heappush(self.available.setdefault(key, []), entry.seq)
        if entry.expires_ms is not None:
            heapq.heappush(self.expiries, (entry.expires_ms, entry.seq))

    def _is_available(self, seq: int) -> Entry | None:
        entry = self.entries.get(seq)
        if entry is None or entry.state != ACTIVE or entry.lock_token is not None or entry.owner is not None:
            return None
        return entry

    # --- delivering ------------------------------------------------------------------------------

    def attach(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def detach(self, consumer: Consumer) -> None:
        """A receiver went away: its session lock and its (session) message locks end now."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        for session_id, lock in list(self.session_locks.items()):
            if lock.owner is consumer:
                del self.session_locks[session_id]
                for entry in [e for e in self.locks.values() if e.session_id == session_id]:
                    self._unlock(entry, counted=False)
        self.pump()

    def _prune(self, key: str | None) -> int | None:
        """Drop unavailable entries from the head of a heap (they are pushed again if they come
        back); forget an emptied heap. Return the first available sequence number, if any."""
        heap = self.available.get(key)
        while heap and self._is_available(heap[0]) is None:
            heapq.heappop(heap)
        if not heap:
            self.available.pop(key, None)
            return None
        return heap[0]

    def _next_for(self, consumer: Consumer, now: int) -> Entry | None:
        if self.settings.requires_session and consumer.session_id is None:
            return None
        heap = self.available.get(consumer.session_id)
        while heap:
            entry = self._is_available(heapq.heappop(heap))
            if entry is None:
                continue
            if entry.expires_ms is not None and entry.expires_ms <= now:
                self._expire(entry)
                continue
            return entry
        self.available.pop(consumer.session_id, None)
        return None

    def pump(self) -> None:
        """Hand available messages to consumers with credit, round-robin: one each per round, so
        consumers share what is available; a lone consumer takes all it has credit for at once.
        One clock reading serves the whole pump (it takes milliseconds at most)."""
        if self.session_waiters:
            # Detach the list first: serving a waiter pumps again, and must not re-run that waiter.
            waiting, self.session_waiters = self.session_waiters, []
            self.session_waiters = [waiter for waiter in waiting if not waiter()] + self.session_waiters
        now = now_ms()
        locked_until = now + self.lock_ms
        locked_any = False
        progress = True
        while progress:
            progress = False
            consumers = list(self.consumers)
            for consumer in consumers:
                turns = 1 if len(consumers) > 1 else consumer.credit
                while turns > 0 and consumer.credit > 0:
                    turns -= 1
                    entry = self._next_for(consumer, now)
                    if entry is None:
                        break
                    progress = True
                    entry.delivery_count += 1
                    if consumer.receive_and_delete:
                        del self.entries[entry.seq]
                        self.router.forget(self, entry.seq)
                        consumer.deliver(entry, None)
                        continue
                    token = new_lock_token()
                    entry.lock_token, entry.owner = token, consumer
                    entry.locked_until_ms = locked_until
                    self.locks[token] = entry
                    locked_any = True
                    self.router.update(self, entry)
                    consumer.deliver(entry, token)
        if locked_any:
            self.locks_checked_until_ms = min(self.locks_checked_until_ms, locked_until)

    # --- settling --------------------------------------------------------------------------------

    def lock_deadline(self, entry: Entry) -> int:
        """When an entry's lock ends: in a locked session, with the session lock (as in Azure,
        where a session receiver renews the session, never single messages)."""
        if self.settings.requires_session and entry.session_id in self.session_locks:
            return self.session_locks[entry.session_id].until_ms
        return entry.locked_until_ms

    def locked(self, token: uuid.UUID) -> Entry:
        entry = self.locks.get(token)
        if entry is None or self.lock_deadline(entry) <= now_ms():
            if entry is not None:
                self._unlock(entry, counted=True)
            raise lock_lost()
        return entry

    def complete(self, token: uuid.UUID) -> None:
        entry = self.locked(token)
        del self.locks[token]
        del self.entries[entry.seq]
        self.router.forget(self, entry.seq)

    def abandon(self, token: uuid.UUID) -> None:
        self._unlock(self.locked(token), counted=True)
        self.pump()

    def release(self, token: uuid.UUID) -> None:
        """Released outcome: the client gave the message back unseen (e.g. prefetched on close)."""
        entry = self.locks.get(token)
        if entry is not None:
            self._unlock(entry, counted=False)
            self.pump()

    def defer(self, token: uuid.UUID) -> None:
        entry = self.locked(token)
        self._drop_lock(entry)
        entry.state = DEFERRED
        self.router.update(self, entry)

    def dead_letter(self, token: uuid.UUID, reason: str, description: str) -> None:
        entry = self.locked(token)
        if self.path.endswith("/$deadletterqueue"):
            raise BrokerError(
                "amqp:not-allowed", "A message in a dead-letter queue cannot be dead-lettered again."
            )
        self._drop_lock(entry)
        self._to_dead_letter(entry, reason, description)

    def renew(self, token: uuid.UUID) -> int:
        entry = self.locked(token)
        entry.locked_until_ms = now_ms() + self.lock_ms
        return entry.locked_until_ms

    def _drop_lock(self, entry: Entry) -> None:
        if entry.lock_token is not None:
            self.locks.pop(entry.lock_token, None)
        entry.lock_token, entry.owner, entry.locked_until_ms = None, None, 0

    def _unlock(self, entry: Entry, *, counted: bool) -> None:
        """Return a locked entry; a counted failure past MaxDeliveryCount dead-letters it."""
        was_deferred = entry.state == DEFERRED
        self._drop_lock(entry)
        if not counted:
            entry.delivery_count = max(0, entry.delivery_count - 1)
        if counted and entry.delivery_count >= self.settings.max_delivery_count:
            self._to_dead_letter(
                entry,
                "MaxDeliveryCountExceeded",
                f"Message could not be consumed after {entry.delivery_count} delivery attempts.",
            )
            return
        self.router.update(self, entry)
        if not was_deferred:
            self._make_available(entry)

    def _to_dead_letter(self, entry: Entry, reason: str, description: str) -> None:
        del self.entries[entry.seq]
        self.router.forget(self, entry.seq)
        self.router.dead_letter(self, entry, reason, description)

    def _expire(self, entry: Entry) -> None:
        if self.settings.dead_lettering_on_expiration:
            self._to_dead_letter(entry, "TTLExpiredException", "The message expired and was dead lettered.")
        else:
            del self.entries[entry.seq]
            self.router.forget(self, entry.seq)

    # --- timers ----------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Expire locks, session locks and TTLs; activate scheduled messages."""
        if now >= self.locks_checked_until_ms:
            deadlines = [(self.lock_deadline(entry), entry) for entry in self.locks.values()]
            for deadline, expired in deadlines:
                if deadline <= now:
                    self._unlock(expired, counted=True)
            later = [deadline for deadline, _ in deadlines if deadline > now]
            later += [lock.until_ms for lock in self.session_locks.values()]
            self.locks_checked_until_ms = min(later, default=1 << 62)
        for session_id, lock in list(self.session_locks.items()):
            if lock.until_ms <= now:
                del self.session_locks[session_id]
                lock.owner.session_lost()
        while self.schedule and self.schedule[0][0] <= now:
            _, seq = heapq.heappop(self.schedule)
            due = self.entries.get(seq)
            if due is not None and due.state == SCHEDULED:
                due.state, due.scheduled_ms = ACTIVE, None
                self.router.update(self, due)
                self._make_available(due)
        while self.expiries and self.expiries[0][0] <= now:
            _, seq = heapq.heappop(self.expiries)
            stale = self._is_available(seq)
            if stale is not None and stale.expires_ms is not None and stale.expires_ms <= now:
                self._expire(stale)
        self.pump()

    # --- sessions --------------------------------------------------------------------------------

    def lock_session(self, session_id: str | None, owner: Consumer) -> str | None:
        """Lock the named session, or (``None``) the next session with available messages."""
        if session_id is None:
            candidates = [
                (self._prune(sid), sid)
                for sid in list(self.available)
                if sid is not None and sid not in self.session_locks
            ]
            ready = [(head, sid) for head, sid in candidates if head is not None]
            if not ready:
                return None
            session_id = min(ready)[1]
        elif session_id in self.session_locks:
            raise BrokerError(
                "com.microsoft:session-cannot-be-locked",
                f"The requested session '{session_id}' cannot be accepted. It may be locked by "
                "another receiver.",
            )
        self.session_locks[session_id] = SessionLock(owner, now_ms() + self.lock_ms)
        self.locks_checked_until_ms = min(
            self.locks_checked_until_ms, self.session_locks[session_id].until_ms
        )
        return session_id

    def session_lock_of(self, session_id: str) -> SessionLock:
        lock = self.session_locks.get(session_id)
        if lock is None or lock.until_ms <= now_ms():
            raise BrokerError(
                "com.microsoft:session-lock-lost",
                f"The session lock has expired on the MessageSession '{session_id}'.",
            )
        return lock

    def renew_session(self, session_id: str) -> int:
        lock = self.session_lock_of(session_id)
        lock.until_ms = now_ms() + self.lock_ms
        return lock.until_ms

    def set_session_state(self, session_id: str, state: bytes | None) -> None:
        self.session_lock_of(session_id)
        if state is None:
            self.session_states.pop(session_id, None)
        else:
            self.session_states[session_id] = state
        self.session_state_updated_ms[session_id] = now_ms()
        self.router.save_session_state(self, session_id, state)

    def session_ids(self, state_updated_after_ms: int | None = None) -> list[str]:
        """Sessions with messages or state; or, given a time, those whose state changed since then."""
        if state_updated_after_ms is not None:
            updated = self.session_state_updated_ms.items()
            return sorted(sid for sid, at in updated if at > state_updated_after_ms)
        active = {e.session_id for e in self.entries.values() if e.session_id is not None}
        return sorted(active | set(self.session_states))

    # --- reading ---------------------------------------------------------------------------------

    def peek(self, from_seq: int, count: int, session_id: str | None = None) -> list[Entry]:
        seqs = sorted(
            seq
            for seq, entry in self.entries.items()
            if seq >= from_seq and (session_id is None or entry.session_id == session_id)
        )
        return [self.entries[seq] for seq in seqs[:count]]

    def lock_deferred(
        self, seqs: Iterable[int], owner: Consumer | None, session_id: str | None
    ) -> list[Entry]:
        found = []
        for seq in seqs:
            entry = self.entries.get(seq)
            if entry is None or entry.state != DEFERRED or (session_id and entry.session_id != session_id):
                raise BrokerError(
                    "com.microsoft:message-not-found",
                    f"Failed to retrieve the deferred message with sequence number {seq}.",
                )
            if entry.lock_token is not None and entry.locked_until_ms > now_ms():
                raise BrokerError(
                    "com.microsoft:message-lock-lost", f"Message {seq} is locked by another receiver."
                )
            found.append(entry)
        for entry in found:
            entry.delivery_count += 1
            entry.lock_token, entry.owner = new_lock_token(), owner
            entry.locked_until_ms = now_ms() + self.lock_ms
            self.locks_checked_until_ms = min(self.locks_checked_until_ms, entry.locked_until_ms)
            self.locks[entry.lock_token] = entry
        return found

    def cancel_scheduled(self, seq: int) -> None:
        entry = self.entries.get(seq)
        if entry is None or entry.state != SCHEDULED:
            raise BrokerError(
                "com.microsoft:message-not-found", f"No scheduled message with sequence number {seq}."
            )
        del self.entries[seq]
        self.router.forget(self, seq)

    def counts(self) -> dict[str, int]:
        states = [entry.state for entry in self.entries.values()]
        return {
            "active": states.count(ACTIVE),
            "deferred": states.count(DEFERRED),
            "scheduled": states.count(SCHEDULED),
        }
