"""Service Bus operations behind `claimcheck-ops`: peek, dead-letter inspection, replay and counts.

Everything here returns metadata only. A message body is read in exactly one place, `_replay_copy`,
to send it back unchanged; it is never returned, printed or put in an error message.

The Azure SDK is imported inside functions so that `claimcheck-ops --help` stays fast.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from scripts.ops_errors import OpsError

if TYPE_CHECKING:
    from azure.servicebus import (
        ServiceBusClient,
        ServiceBusMessage,
        ServiceBusReceivedMessage,
        ServiceBusReceiver,
        ServiceBusSender,
        ServiceBusSessionFilter,
    )

# Application properties whose values `dlq show` prints: the routing values producers set so filters
# never parse the body (DESIGN.md §4), plus trace context. Any other property is listed by name only,
# because its value may be something an operator's terminal should not hold.
ROUTING_PROPERTIES = (
    "tenant",
    "tenant_id",
    "purpose",
    "priority",
    "document_type",
    "review_required",
    "schema",
    "work_item_id",
    "payload_version",
    "traceparent",
    "tracestate",
)
HIDDEN_VALUE = "(value not shown)"
# Set by the broker on dead-lettering; a replayed copy must not carry them into the live entity.
_DEAD_LETTER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
_MAX_MESSAGE_ID_LENGTH = 128  # Service Bus limit
_PEEK_PAGE = 100
_RECEIVE_BATCH = 20
_MAX_BROWSE = 100_000  # bounds a presence check on a huge DLQ
_RECEIVE_WAIT_SECONDS = 5.0
# How long accepting the next available session may wait before we conclude there is none left.
_SESSION_WAIT_SECONDS = 0.5


@dataclass(frozen=True)
class Entity:
    """A queue, or a topic subscription when `subscription` is set."""

    name: str
    subscription: str | None = None

    def __str__(self) -> str:
        return f"{self.name}/subscriptions/{self.subscription}" if self.subscription else self.name


@dataclass(frozen=True)
class BusTarget:
    """Where the Service Bus is: an emulator or SAS connection string, or a namespace FQDN + Entra ID."""

    connection_string: str | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        if bool(self.connection_string) == bool(self.namespace):
            raise OpsError(
                "give exactly one of --connection-string (CLAIMCHECK_SERVICEBUS_CONNECTION) "
                "or --namespace (CLAIMCHECK_SERVICEBUS_NAMESPACE)"
            )
        if self.connection_string:
            from azure.servicebus import parse_connection_string

            try:
                parse_connection_string(self.connection_string)
            except ValueError:
                # Not the parser's text: an error about a connection string must not risk quoting it.
                raise OpsError(
                    "--connection-string (CLAIMCHECK_SERVICEBUS_CONNECTION) is not a Service Bus "
                    "connection string; expected Endpoint=sb://HOST[:PORT];SharedAccessKeyName=NAME;"
                    "SharedAccessKey=KEY (plus UseDevelopmentEmulator=true for the local emulator)"
                ) from None

    @property
    def is_emulator(self) -> bool:
        settings = (part.split("=", 1) for part in (self.connection_string or "").split(";") if "=" in part)
        return any(
            k.strip().lower() == "usedevelopmentemulator" and v.strip().lower() == "true" for k, v in settings
        )

    @contextmanager
    def client(self, *, retries: int = 1) -> Iterator[ServiceBusClient]:
        """A client that fails within seconds: an operator is waiting at a terminal.

        ``retries=0`` also stops the SDK from retrying (with backoff) a wait for the next available
        session that found none, which is the normal end of a walk over sessions."""
        from azure.servicebus import ServiceBusClient

        retry: dict[str, Any] = {"retry_total": retries, "retry_backoff_factor": 0.5, "retry_backoff_max": 2}
        if self.connection_string:
            client = ServiceBusClient.from_connection_string(self.connection_string, **retry)
        else:
            from azure.identity import DefaultAzureCredential

            client = ServiceBusClient(str(self.namespace), DefaultAzureCredential(), **retry)
        with client:
            yield client


@dataclass(frozen=True)
class MessageSummary:
    """What `peek` and `dlq list` show of one message: system metadata, never the body."""

    sequence_number: int
    message_id: str | None
    session_id: str | None
    correlation_id: str | None
    enqueued_time: datetime | None
    delivery_count: int | None
    state: str
    subject: str | None
    content_type: str | None
    dead_letter_reason: str | None
    dead_letter_description: str | None


@dataclass(frozen=True)
class MessageDetail:
    """What `dlq show` prints: the summary, the remaining system properties and the routing values."""

    summary: MessageSummary
    expires_at: datetime | None
    time_to_live_seconds: float | None
    dead_letter_source: str | None
    to: str | None
    reply_to: str | None
    application_properties: dict[str, str] = field(default_factory=dict)


class ReplayStatus(StrEnum):
    REPLAYED = "replayed"
    NOT_FOUND = "not_found"
    SEND_FAILED = "send_failed"
    SENT_NOT_COMPLETED = "sent_not_completed"


@dataclass(frozen=True)
class ReplayResult:
    sequence_number: int
    status: ReplayStatus
    detail: str
    original_message_id: str | None = None
    replay_message_id: str | None = None
    destination: str | None = None


def first_line(exc: Exception) -> str:
    """An SDK error's first line, without the `b"..."` wrapping pyamqp puts around the broker's text."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"""\bb(["'])(.*?)\1""", r"\2", line)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def summarize(message: ServiceBusReceivedMessage) -> MessageSummary:
    state = message.state
    return MessageSummary(
        sequence_number=int(message.sequence_number or 0),
        message_id=message.message_id,
        session_id=message.session_id,
        correlation_id=message.correlation_id,
        enqueued_time=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        state=state.name.lower() if hasattr(state, "name") else _text(state),
        subject=message.subject,
        content_type=message.content_type,
        dead_letter_reason=message.dead_letter_reason,
        dead_letter_description=message.dead_letter_error_description,
    )


def describe(message: ServiceBusReceivedMessage) -> MessageDetail:
    properties: dict[str, str] = {}
    for raw_key, raw_value in (message.application_properties or {}).items():
        key = _text(raw_key)
        if key in _DEAD_LETTER_PROPERTIES:
            continue  # already shown as reason / description
        properties[key] = _text(raw_value) if key in ROUTING_PROPERTIES else HIDDEN_VALUE
    ttl = message.time_to_live
    return MessageDetail(
        summary=summarize(message),
        expires_at=message.expires_at_utc,
        time_to_live_seconds=ttl.total_seconds() if ttl is not None else None,
        dead_letter_source=message.dead_letter_source,
        to=message.to,
        reply_to=message.reply_to,
        application_properties=dict(sorted(properties.items())),
    )


@contextmanager
def receiver_for(
    client: ServiceBusClient,
    entity: Entity,
    *,
    dead_letter: bool,
    session_id: str | ServiceBusSessionFilter | None = None,
    max_wait_time: float | None = None,
) -> Iterator[ServiceBusReceiver]:
    from azure.servicebus import ServiceBusSubQueue

    sub_queue = ServiceBusSubQueue.DEAD_LETTER if dead_letter else None
    options: dict[str, Any] = {
        "sub_queue": sub_queue,
        "session_id": session_id,
        "prefetch_count": 0,
        "max_wait_time": max_wait_time,
    }
    if entity.subscription:
        receiver = client.get_subscription_receiver(entity.name, entity.subscription, **options)
    else:
        receiver = client.get_queue_receiver(entity.name, **options)
    with receiver:
        yield receiver


def peek_pages(
    receiver: ServiceBusReceiver, limit: int, start: int = 1
) -> Iterator[ServiceBusReceivedMessage]:
    """Peek up to `limit` messages from sequence number `start` on, page by page (no lock taken)."""
    next_sequence = max(start, 1)  # 0 would make the SDK resume after its last received message
    remaining = limit
    while remaining > 0:
        page = receiver.peek_messages(min(remaining, _PEEK_PAGE), sequence_number=next_sequence)
        if not page:
            return
        yield from page
        remaining -= len(page)
        next_sequence = int(page[-1].sequence_number or 0) + 1


def peek(
    client: ServiceBusClient,
    entity: Entity,
    *,
    dead_letter: bool,
    limit: int,
    session_id: str | None = None,
) -> list[MessageSummary]:
    """Browse up to `limit` messages. Without `session_id`, an entity that requires sessions (whose
    active messages only a session receiver can reach) is browsed session by session."""
    from azure.servicebus.exceptions import ServiceBusError

    try:
        with receiver_for(client, entity, dead_letter=dead_letter, session_id=session_id) as receiver:
            return [summarize(message) for message in peek_pages(receiver, limit)]
    except ServiceBusError as exc:
        if dead_letter or session_id is not None or not _requires_session(exc):
            raise
    return peek_every_session(client, entity, limit=limit)


def _requires_session(exc: Exception) -> bool:
    """Service Bus refuses a non-session receiver on a session entity (Azure and the emulator alike:
    "It is not possible for an entity that requires sessions to create a non-sessionful message
    receiver", amqp:not-allowed); the SDK has no exception type of its own for it."""
    return "requires sessions" in first_line(exc)


def peek_every_session(client: ServiceBusClient, entity: Entity, *, limit: int) -> list[MessageSummary]:
    """Browse the sessions no other receiver holds, in sequence-number order, up to `limit` messages.

    Service Bus has no browse across sessions, and the SDK cannot list them, so this accepts the next
    available session again and again, keeping each one until the end (so the next accept finds
    another), peeks it, and then releases them all. Meanwhile a consumer waits for those sessions;
    nothing is received, locked or counted as a delivery. Sessions a consumer holds are not shown."""
    from azure.servicebus import NEXT_AVAILABLE_SESSION
    from azure.servicebus.exceptions import OperationTimeoutError

    found: list[MessageSummary] = []
    with ExitStack() as held:
        while len(found) < limit:
            try:
                receiver = held.enter_context(
                    receiver_for(
                        client,
                        entity,
                        dead_letter=False,
                        session_id=NEXT_AVAILABLE_SESSION,
                        max_wait_time=_SESSION_WAIT_SECONDS,
                    )
                )
            except OperationTimeoutError:
                break  # no further session is available
            found.extend(summarize(message) for message in peek_pages(receiver, limit - len(found)))
    return sorted(found, key=lambda message: message.sequence_number)


def show_dead_letter(client: ServiceBusClient, entity: Entity, sequence_number: int) -> MessageDetail | None:
    with receiver_for(client, entity, dead_letter=True) as receiver:
        found = receiver.peek_messages(1, sequence_number=max(sequence_number, 1))
    if found and found[0].sequence_number == sequence_number:
        return describe(found[0])
    return None


def replay_message_id(original_message_id: str | None, dead_letter_sequence_number: int) -> str:
    """The copy's message id: the same for every replay of one DLQ message, so the broker de-duplicates."""
    candidate = f"{original_message_id or 'message'}.replay.{dead_letter_sequence_number}"
    if len(candidate) <= _MAX_MESSAGE_ID_LENGTH:
        return candidate
    digest = hashlib.sha256((original_message_id or "").encode("utf-8")).hexdigest()[:64]
    return f"{digest}.replay.{dead_letter_sequence_number}"


def _replay_copy(message: ServiceBusReceivedMessage) -> ServiceBusMessage:
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.amqp import AmqpMessageBodyType

    if message.body_type != AmqpMessageBodyType.DATA:
        raise OpsError(f"its AMQP body type is {message.body_type.value}; replay copies data bodies only")
    properties: dict[str | bytes, Any] = {
        _text(key): _text(value) if isinstance(value, bytes) else value
        for key, value in (message.application_properties or {}).items()
        if _text(key) not in _DEAD_LETTER_PROPERTIES
    }
    return ServiceBusMessage(
        b"".join(message.body),
        application_properties=properties,
        session_id=message.session_id,
        message_id=replay_message_id(message.message_id, int(message.sequence_number or 0)),
        time_to_live=message.time_to_live,
        content_type=message.content_type,
        correlation_id=message.correlation_id,
        subject=message.subject,
        to=message.to,
        reply_to=message.reply_to,
        reply_to_session_id=message.reply_to_session_id,
    )


def _replay_one(
    receiver: ServiceBusReceiver,
    sender: ServiceBusSender,
    message: ServiceBusReceivedMessage,
    destination: str,
) -> ReplayResult:
    from azure.servicebus.exceptions import ServiceBusError

    not_sent = ReplayResult(
        sequence_number=int(message.sequence_number or 0),
        status=ReplayStatus.SEND_FAILED,
        detail="",
        original_message_id=message.message_id,
    )
    try:
        copy = _replay_copy(message)
        sender.send_messages(copy)
    except (OpsError, ServiceBusError) as exc:
        with suppress(ServiceBusError):  # else the lock expires; the message stays in the DLQ either way
            receiver.abandon_message(message)
        return replace(not_sent, detail=f"not sent, left in the DLQ: {first_line(exc)}")
    sent = replace(not_sent, replay_message_id=copy.message_id, destination=destination)
    try:
        receiver.complete_message(message)
    except ServiceBusError as exc:
        return replace(
            sent,
            status=ReplayStatus.SENT_NOT_COMPLETED,
            detail=f"sent, but the DLQ message could not be completed ({first_line(exc)}); "
            "run the replay again: the copy has the same message id, so duplicate detection drops it",
        )
    return replace(sent, status=ReplayStatus.REPLAYED, detail=f"sent to {destination}")


def replay(
    client: ServiceBusClient, entity: Entity, sequence_numbers: Sequence[int] | None, *, limit: int
) -> list[ReplayResult]:
    """Move dead-lettered messages back to their entity (a subscription's go to its topic).

    `sequence_numbers=None` means every message in the DLQ now (at most `limit`). Only sequence
    numbers that a peek finds in the DLQ are received. Each is received in peek-lock, its copy sent,
    then completed. Service Bus cannot receive by sequence number, so messages met on the way that
    are not wanted stay locked until the end and are then abandoned: they remain in the DLQ, their
    delivery count one higher.
    """
    from azure.servicebus.exceptions import ServiceBusError

    results = {
        number: ReplayResult(
            sequence_number=number,
            status=ReplayStatus.NOT_FOUND,
            detail="not in the dead-letter queue (replayed or removed, or locked by another receiver)",
        )
        for number in sequence_numbers or ()
    }
    held: list[ServiceBusReceivedMessage] = []
    sender_factory = client.get_topic_sender if entity.subscription else client.get_queue_sender
    with receiver_for(client, entity, dead_letter=True) as receiver, sender_factory(entity.name) as sender:
        wanted = _dead_lettered(receiver, sequence_numbers, limit)
        try:
            while wanted:
                batch = receiver.receive_messages(
                    max_message_count=min(len(wanted), _RECEIVE_BATCH), max_wait_time=_RECEIVE_WAIT_SECONDS
                )
                if not batch:
                    break
                for message in batch:
                    sequence_number = int(message.sequence_number or 0)
                    if sequence_number in wanted:
                        wanted.discard(sequence_number)
                        results[sequence_number] = _replay_one(receiver, sender, message, entity.name)
                    else:
                        held.append(message)
        finally:
            for message in held:
                # If abandoning fails the lock expires on its own; the message stays in the DLQ either way.
                with suppress(ServiceBusError):
                    receiver.abandon_message(message)
    return [results[number] for number in sorted(results)]


def _dead_lettered(
    receiver: ServiceBusReceiver, sequence_numbers: Sequence[int] | None, limit: int
) -> set[int]:
    """Which of `sequence_numbers` (None: any, at most `limit`) a peek finds in the DLQ right now."""
    if sequence_numbers is None:
        return {int(message.sequence_number or 0) for message in peek_pages(receiver, limit)}
    if not sequence_numbers:
        return set()
    found: set[int] = set()
    highest = max(sequence_numbers)
    for message in peek_pages(receiver, limit=_MAX_BROWSE, start=min(sequence_numbers)):
        sequence_number = int(message.sequence_number or 0)
        if sequence_number > highest:
            break
        if sequence_number in sequence_numbers:
            found.add(sequence_number)
    return found
