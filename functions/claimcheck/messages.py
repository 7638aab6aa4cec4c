"""The Bus port: what the consumer receives and what the core publishes, SDK-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

ApplicationValue = str | int | bool | float


@dataclass(frozen=True)
class InboundMessage:
    """What the consumer needs of one Service Bus delivery."""

    body: bytes
    message_id: str
    # 1 on first delivery; None when the trigger does not report it (Azure Functions' binding data,
    # see claimcheck.deliveries): then the consumer counts the deliveries it retries itself.
    delivery_count: int | None
    session_id: str | None = None
    correlation_id: str | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    enqueued_time: datetime | None = None
    sequence_number: int | None = None  # with message_id, names the message for the app's own count
    lock_token: str | None = None  # names this delivery (each delivery has its own lock)


@dataclass(frozen=True)
class OutboundMessage:
    """What the Bus port publishes."""

    body: bytes
    message_id: str
    content_type: str
    session_id: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    application_properties: Mapping[str, ApplicationValue] = field(default_factory=dict)
    time_to_live: timedelta | None = None


class Bus(Protocol):
    """Publishes to a queue or topic. Raises on failure; returning means the broker confirmed."""

    def publish(self, destination: str, message: OutboundMessage) -> None: ...
