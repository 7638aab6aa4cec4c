"""Service Bus operations behind `claimcheck-ops`: peek, dead-letter inspection, replay and counts.

Everything here returns metadata only; a message body is never returned, printed or put in an error
message. The replay itself (and the paged peek) is the Function App's own, claimcheck/adapters/
dead_letter_replay.py: one implementation for the operator route and this CLI, so both send the same
copy under the same id. functions/ is on the path wherever the CLI runs (scripts/__init__.py).

The Azure SDK is imported inside functions so that `claimcheck-ops --help` stays fast.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from claimcheck.adapters.dead_letter_replay import (
    DEAD_LETTER_PROPERTIES,
    ReplayResult,
    ReplayStatus,
    first_line,
    optional_text,
    peek_pages,
    replay_from,
    text_of,
)

from scripts.ops_errors import OpsError

if TYPE_CHECKING:
    from azure.servicebus import (
        ServiceBusClient,
        ServiceBusReceivedMessage,
        ServiceBusReceiver,
        ServiceBusSessionFilter,
    )

__all__ = ["ReplayResult", "ReplayStatus", "first_line", "peek_pages"]  # what the CLI's modules import here

# Application properties whose values `dlq show` prints: the routing values producers set so filters
# never parse the body (docs/architecture.md §4), plus trace context. Any other property is listed by name
# only, because its value may be something an operator's terminal should not hold.
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
                "or --namespace (CLAIMCHECK_SERVICEBUS_NAMESPACE), or start the local stack "
                "(python -m local.stack), which claimcheck-ops finds by itself"
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


def summarize(message: ServiceBusReceivedMessage) -> MessageSummary:
    state = message.state
    return MessageSummary(
        sequence_number=int(message.sequence_number or 0),
        message_id=optional_text(message.message_id),
        session_id=message.session_id,
        correlation_id=optional_text(message.correlation_id),
        enqueued_time=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        state=state.name.lower() if hasattr(state, "name") else text_of(state),
        subject=message.subject,
        content_type=message.content_type,
        dead_letter_reason=optional_text(message.dead_letter_reason),
        dead_letter_description=optional_text(message.dead_letter_error_description),
    )


def describe(message: ServiceBusReceivedMessage) -> MessageDetail:
    properties: dict[str, str] = {}
    for raw_key, raw_value in (message.application_properties or {}).items():
        key = text_of(raw_key)
        if key in DEAD_LETTER_PROPERTIES:
            continue  # already shown as reason / description
        properties[key] = text_of(raw_value) if key in ROUTING_PROPERTIES else HIDDEN_VALUE
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


# How many dead letters `dlq list --work-item` browses at most to find that work item's (oldest first).
WORK_ITEM_SCAN_LIMIT = 10_000


def peek(
    client: ServiceBusClient,
    entity: Entity,
    *,
    dead_letter: bool,
    limit: int,
    session_id: str | None = None,
    work_item: str | None = None,
) -> list[MessageSummary]:
    """Browse up to `limit` messages. Without `session_id`, an entity that requires sessions (whose
    active messages only a session receiver can reach) is browsed session by session. `work_item`
    (dead letters only: a DLQ has no sessions) keeps that work item's messages, browsing up to
    WORK_ITEM_SCAN_LIMIT, so a long queue does not hide them behind older ones."""
    from azure.servicebus.exceptions import ServiceBusError

    try:
        with receiver_for(client, entity, dead_letter=dead_letter, session_id=session_id) as receiver:
            if work_item is not None:
                matches = (
                    message
                    for message in peek_pages(receiver, WORK_ITEM_SCAN_LIMIT)
                    if message.session_id == work_item
                )
                return [summarize(message) for message in itertools.islice(matches, limit)]
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


def replay(
    client: ServiceBusClient, entity: Entity, sequence_numbers: Sequence[int] | None, *, limit: int
) -> list[ReplayResult]:
    """Move dead-lettered messages back to their entity (a subscription's go to its topic), exactly as
    the operator route does (claimcheck.adapters.dead_letter_replay.replay_from: peek-lock, send the
    copy, then complete; messages met on the way stay dead-lettered)."""
    sender_factory = client.get_topic_sender if entity.subscription else client.get_queue_sender
    with receiver_for(client, entity, dead_letter=True) as receiver, sender_factory(entity.name) as sender:
        return replay_from(receiver, sender, entity.name, sequence_numbers, limit=limit)
