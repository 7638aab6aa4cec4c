"""Azure Service Bus adapter of the ``Bus`` port (azure-servicebus), imported lazily.

Identity-based on Azure (fully qualified namespace + a token credential, DefaultAzureCredential by
default) or a connection string locally (our emulator). A publish returns only after the broker
settled the send, which is the "confirmed" the producer waits for before activating a reference; it
fails after ``send_timeout`` seconds, retries included, so that no caller waits on a broker that is down.
A failed send raises ``BrokerUnavailable`` or ``BrokerFailed`` (adapters/sdk_errors.py).

SDK senders are not thread-safe, so each publish borrows an idle sender of its destination (or opens
one) and returns it afterwards: concurrent publishes run side by side instead of queueing behind one
lock, and senders are reused across requests (a sender per thread would leak one AMQP connection per
short-lived request thread). At most ``_IDLE_SENDERS`` idle senders per destination are kept.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from claimcheck.adapters.sdk_errors import bus_errors
from claimcheck.messages import InboundMessage, OutboundMessage
from claimcheck.settings import RESULTS_TOPIC

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential
    from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusSender


# One quick retry inside a publish (a dropped connection is reopened), not the SDK's default three
# with backoff: a broker that refuses connections should fail the publish in milliseconds, so that the
# intake's circuit breaker opens at once; callers retry at their own level (the consumer's outage
# wait, the HTTP client after Retry-After).
_RETRY: dict[str, Any] = {"retry_total": 1, "retry_backoff_factor": 0.2, "retry_backoff_max": 1}
_IDLE_SENDERS = 8


class ServiceBusBus:
    def __init__(
        self,
        *,
        connection_string: str | None = None,
        fully_qualified_namespace: str | None = None,
        credential: TokenCredential | None = None,
        topics: Collection[str] = (RESULTS_TOPIC,),
        send_timeout: float = 5.0,
    ) -> None:
        from azure.servicebus import ServiceBusClient

        if (connection_string is None) == (fully_qualified_namespace is None):
            raise ValueError("give exactly one of connection_string and fully_qualified_namespace")
        if connection_string is not None:
            self._client: ServiceBusClient = ServiceBusClient.from_connection_string(
                connection_string, **_RETRY
            )
        else:
            assert fully_qualified_namespace is not None
            if credential is None:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
            self._client = ServiceBusClient(fully_qualified_namespace, credential, **_RETRY)
        self._topics = frozenset(topics)
        self._send_timeout = send_timeout
        self._idle: dict[str, list[ServiceBusSender]] = {}  # senders no publish is using, by destination
        self._lock = threading.Lock()

    def publish(self, destination: str, message: OutboundMessage) -> None:
        from azure.servicebus import ServiceBusMessage

        properties: dict[str | bytes, Any] = {
            key: value for key, value in message.application_properties.items()
        }
        outgoing = ServiceBusMessage(
            body=message.body,
            message_id=message.message_id,
            content_type=message.content_type,
            session_id=message.session_id,
            correlation_id=message.correlation_id,
            subject=message.subject,
            application_properties=properties,
            time_to_live=message.time_to_live,
        )
        sender = self._borrow(destination)
        try:
            # A sender whose send failed is still reusable: the SDK reopens its link on the next send.
            with bus_errors(f"publish to {destination}"):
                sender.send_messages(outgoing, timeout=self._send_timeout)
        finally:
            self._give_back(destination, sender)

    def _borrow(self, destination: str) -> ServiceBusSender:
        with self._lock:
            idle = self._idle.get(destination)
            if idle:
                return idle.pop()
            # Opening happens lazily on the first send, outside the lock.
            if destination in self._topics:
                return self._client.get_topic_sender(topic_name=destination)
            return self._client.get_queue_sender(queue_name=destination)

    def _give_back(self, destination: str, sender: ServiceBusSender) -> None:
        with self._lock:
            idle = self._idle.setdefault(destination, [])
            if len(idle) < _IDLE_SENDERS:
                idle.append(sender)
                return
        sender.close()  # more idle senders than a burst needs again soon

    def close(self) -> None:
        with self._lock:
            for idle in self._idle.values():
                for sender in idle:
                    sender.close()
            self._idle.clear()
            self._client.close()


def inbound_message(message: ServiceBusReceivedMessage) -> InboundMessage:
    """What the consumer needs of one delivery received with the azure-servicebus SDK."""
    # The AMQP decoder may hand property keys and string values over as bytes.
    properties = {
        str(_text(key)): _text(value) for key, value in (message.application_properties or {}).items()
    }
    return InboundMessage(
        body=_data_body(message),
        message_id=str(message.message_id),
        delivery_count=_delivery_count(message),
        session_id=message.session_id,
        correlation_id=message.correlation_id,
        application_properties=properties,
        enqueued_time=message.enqueued_time_utc,
        sequence_number=message.sequence_number,
        lock_token=None if message.lock_token is None else str(message.lock_token),
    )


def _delivery_count(message: ServiceBusReceivedMessage) -> int | None:
    """1 on first delivery, from the AMQP header's "previous deliveries" (absent means 0); None when
    the message came without its header, as the Functions binding extension decodes it on Azure."""
    header = message.raw_amqp_message.header
    if header is None:
        return None
    return (header.delivery_count or 0) + 1


def _data_body(message: ServiceBusReceivedMessage) -> bytes:
    """A data body's sections, joined. A value or sequence body (any AMQP sender may write one) is no
    envelope: it reads as an empty body, which the consumer dead-letters invalid_envelope at once,
    instead of a TypeError in the trigger that would spend every delivery of the message."""
    from azure.servicebus.amqp import AmqpMessageBodyType

    if message.body_type != AmqpMessageBodyType.DATA:
        return b""
    return b"".join(message.body)


def _text(value: object) -> object:
    # "replace": a binary property that is not UTF-8 (the SDK never sends one, other AMQP clients may)
    # must not raise in the trigger; the consumer checks the values it uses.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
