"""Dead-letter browsing and replay for the Function App's operator routes (``GET /api/dead-letters``,
``POST /api/dead-letters/{n}/replay``): the ``documents`` queue, with the app's own identity, through the
real ``azure-servicebus`` SDK. Metadata only: a message body is read in two places, never returned,
logged or put in an error message: adapters/dead_letter_replay.py's ``_replay_copy``, to send it back
unchanged, and ``dead_lettered``, which parses its envelope to attribute the message to its record
(claimcheck.dead_letter_scope), as the consumer reads it (adapters/servicebus.inbound_message).

The replay is adapters/dead_letter_replay.py's, the one ``claimcheck-ops dlq replay`` runs too (same
copy id ``<id>.replay.<sequence>``, so the two paths de-duplicate each other).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from claimcheck.adapters.dead_letter_replay import (
    ReplayResult,
    ReplayStatus,
    optional_text,
    peek_pages,
    replay_from,
    text_of,
)
from claimcheck.adapters.sdk_errors import bus_errors
from claimcheck.adapters.servicebus import inbound_message
from claimcheck.provenance import Stated, stated_by
from claimcheck.workitems import WorkItemRecord

if TYPE_CHECKING:
    from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver

__all__ = ["DeadLettered", "QueueDeadLetters", "ReplayResult", "ReplayStatus"]


@dataclass(frozen=True)
class DeadLettered:
    """One dead-lettered message of the ``documents`` queue, as the operator routes show it: work item,
    tenant and purpose as its record has them (``attributed_to``), never as the message states them."""

    sequence_number: int
    message_id: str | None
    work_item_id: str | None  # the session id until attributed to its record
    tenant: str | None  # the stated property until attributed to its record
    purpose: str | None
    enqueued_at: datetime | None
    delivery_count: int | None
    reason: str | None
    description: str | None
    # What the message states (its envelope, session id, properties): the attribution's input, not shown.
    stated: Stated | None = field(default=None, compare=False, repr=False)

    def attributed_to(self, record: WorkItemRecord) -> DeadLettered:
        """This dead letter as the routes show it once attributed to ``record`` (dead_letter_scope)."""
        return replace(
            self, work_item_id=record.work_item_id, tenant=record.tenant_id, purpose=record.purpose
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_number": self.sequence_number,
            "message_id": self.message_id,
            "work_item_id": self.work_item_id,
            "tenant": self.tenant,
            "purpose": self.purpose,
            "enqueued_at": None if self.enqueued_at is None else self.enqueued_at.isoformat(),
            "delivery_count": self.delivery_count,
            "reason": self.reason,
            "description": self.description,
        }


def dead_lettered(message: ServiceBusReceivedMessage) -> DeadLettered:
    """Every field as text (or None, adapters/dead_letter_replay.optional_text): the routes answer JSON."""
    properties = {text_of(key): value for key, value in (message.application_properties or {}).items()}
    return DeadLettered(
        sequence_number=int(message.sequence_number or 0),
        message_id=optional_text(message.message_id),
        work_item_id=optional_text(message.session_id),
        tenant=optional_text(properties.get("tenant")),
        purpose=optional_text(properties.get("purpose")),
        enqueued_at=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        reason=optional_text(message.dead_letter_reason),
        description=optional_text(message.dead_letter_error_description),
        stated=stated_by(inbound_message(message)),
    )


class QueueDeadLetters:
    """The operator routes' view of one queue's dead-letter subqueue (the app's own client). A failure
    of the whole call raises ``BrokerUnavailable`` or ``BrokerFailed`` (adapters/sdk_errors.py); a
    replay's per-message failures are its ``ReplayResult``."""

    def __init__(self, client: ServiceBusClient, queue: str) -> None:
        self._client = client
        self.queue = queue

    def list(self, limit: int) -> list[DeadLettered]:
        with bus_errors("dead-letter list"), self._receiver() as receiver:
            return [dead_lettered(message) for message in peek_pages(receiver, limit)]

    def find(self, sequence_number: int) -> DeadLettered | None:
        with bus_errors("dead-letter peek"), self._receiver() as receiver:
            found = receiver.peek_messages(1, sequence_number=max(sequence_number, 1))
        if found and found[0].sequence_number == sequence_number:
            return dead_lettered(found[0])
        return None

    def replay(self, sequence_number: int) -> ReplayResult:
        with (
            bus_errors("dead-letter replay"),
            self._receiver() as receiver,
            self._client.get_queue_sender(self.queue) as sender,
        ):
            [result] = replay_from(receiver, sender, self.queue, [sequence_number], limit=1)
        return result

    def _receiver(self) -> ServiceBusReceiver:
        from azure.servicebus import ServiceBusSubQueue

        return self._client.get_queue_receiver(
            self.queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
        )
