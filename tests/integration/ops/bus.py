"""Real-SDK helpers that put messages where the ops CLI tests need them (DLQ, queue, subscription)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)

_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class DeadLettered:
    message_id: str
    sequence_number: int
    body: bytes


def secret_body() -> bytes:
    """A body whose bytes are easy to search for in CLI output."""
    return f'{{"marker": "PAYLOAD-BYTES-{uuid.uuid4().hex}"}}'.encode()


def _message(body: bytes, session_id: str | None, properties: Mapping[str, str]) -> ServiceBusMessage:
    return ServiceBusMessage(
        body,
        message_id=f"msg-{uuid.uuid4().hex[:12]}",
        session_id=session_id,
        correlation_id=f"corr-{uuid.uuid4().hex[:8]}",
        content_type="application/json",
        application_properties={key: value for key, value in properties.items()},
    )


def dead_letter_from_queue(
    connection: str,
    *,
    session_id: str,
    reason: str = "invalid_envelope",
    description: str = "schema major version 9 is not supported",
    properties: Mapping[str, str] | None = None,
) -> DeadLettered:
    """Send one message to `documents`, receive it in its session and dead-letter it with a reason."""
    body = secret_body()
    message = _message(body, session_id, properties or {"tenant": "acme", "priority": "normal"})
    with ServiceBusClient.from_connection_string(connection) as client:
        with client.get_queue_sender("documents") as sender:
            sender.send_messages(message)
        with client.get_queue_receiver(
            "documents", session_id=session_id, max_wait_time=_WAIT_SECONDS
        ) as receiver:
            (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=_WAIT_SECONDS)
            receiver.dead_letter_message(received, reason=reason, error_description=description)
        sequence_number = _dead_letter_sequence(client, "documents", None, str(message.message_id))
    return DeadLettered(str(message.message_id), sequence_number, body)


def dead_letter_from_replays(connection: str) -> DeadLettered:
    """Publish one message to `results` for the `replays` subscription, receive it there, dead-letter it.

    Only messages with lane = 'replays' reach that subscription, so the one received is this one.
    """
    body = secret_body()
    message = _message(body, None, {"tenant": "acme", "priority": "high", "lane": "replays"})
    with ServiceBusClient.from_connection_string(connection) as client:
        with client.get_topic_sender("results") as sender:
            sender.send_messages(message)
        with client.get_subscription_receiver("results", "replays", max_wait_time=_WAIT_SECONDS) as receiver:
            (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=_WAIT_SECONDS)
            assert received.message_id == message.message_id
            receiver.dead_letter_message(
                received, reason="processing_failed", error_description="analyzer failed"
            )
        sequence_number = _dead_letter_sequence(client, "results", "replays", str(message.message_id))
    return DeadLettered(str(message.message_id), sequence_number, body)


def publish(connection: str, *, session_id: str | None = None) -> DeadLettered:
    """Send one active message (to `documents` in `session_id`, else to `results`); return its ids."""
    body = secret_body()
    message = _message(body, session_id, {"tenant": "acme", "priority": "normal"})
    with ServiceBusClient.from_connection_string(connection) as client:
        sender = client.get_queue_sender("documents") if session_id else client.get_topic_sender("results")
        with sender:
            sender.send_messages(message)
    return DeadLettered(str(message.message_id), 0, body)


def drain_replays(connection: str) -> list[ServiceBusReceivedMessage]:
    """Receive and remove every active message of the `replays` subscription."""
    with ServiceBusClient.from_connection_string(connection) as client:
        receiver = client.get_subscription_receiver(
            "results", "replays", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        )
        with receiver:
            return _drain(receiver)


def drain_session(connection: str, session_id: str) -> list[ServiceBusReceivedMessage]:
    """Receive and remove every active message of one `documents` session."""
    with ServiceBusClient.from_connection_string(connection) as client:
        receiver = client.get_queue_receiver(
            "documents", session_id=session_id, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        )
        with receiver:
            return _drain(receiver)


def _drain(receiver: ServiceBusReceiver) -> list[ServiceBusReceivedMessage]:
    """Everything the receiver gets until it waits 2 s for nothing (bounded: at most 1000 messages)."""
    received: list[ServiceBusReceivedMessage] = []
    while len(received) < 1000 and (
        batch := receiver.receive_messages(max_message_count=50, max_wait_time=2)
    ):
        received.extend(batch)
    return received


def dead_letter_message_ids(connection: str, entity: str, subscription: str | None = None) -> set[str]:
    with ServiceBusClient.from_connection_string(connection) as client:
        return {str(message.message_id) for message in _peek_dead_letters(client, entity, subscription)}


def _peek_dead_letters(
    client: ServiceBusClient, entity: str, subscription: str | None
) -> list[ServiceBusReceivedMessage]:
    sub_queue = ServiceBusSubQueue.DEAD_LETTER
    receiver = (
        client.get_subscription_receiver(entity, subscription, sub_queue=sub_queue)
        if subscription
        else client.get_queue_receiver(entity, sub_queue=sub_queue)
    )
    with receiver:
        return receiver.peek_messages(max_message_count=1000, sequence_number=1)


def _dead_letter_sequence(
    client: ServiceBusClient, entity: str, subscription: str | None, message_id: str
) -> int:
    for message in _peek_dead_letters(client, entity, subscription):
        if message.message_id == message_id:
            return int(message.sequence_number or 0)
    raise AssertionError(f"message {message_id} did not reach the dead-letter queue of {entity}")
