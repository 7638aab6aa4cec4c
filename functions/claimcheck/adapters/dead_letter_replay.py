"""Dead-letter replay and browsing through the real ``azure-servicebus`` SDK: the one implementation
behind the Function App's operator route (``POST /api/dead-letters/{n}/replay``, through
adapters/dead_letter_queue.py) and ``claimcheck-ops dlq list/show/replay`` (scripts/ops_servicebus.py),
so both send the same copy with the same id ``<id>.replay.<sequence>`` and de-duplicate each other.

Metadata only: a message body is read in exactly one place, ``_replay_copy``, to send it back
unchanged; it is never returned, logged or put in an error message. The SDK is imported inside the
functions, so that importing this module (``claimcheck-ops --help``) loads no Azure SDK.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from azure.servicebus import (
        ServiceBusMessage,
        ServiceBusReceivedMessage,
        ServiceBusReceiver,
        ServiceBusSender,
    )

# Set by the broker on dead-lettering; a replayed copy must not carry them into the live entity.
DEAD_LETTER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
_MAX_MESSAGE_ID_LENGTH = 128  # Service Bus limit
_PEEK_PAGE = 100
_RECEIVE_BATCH = 20
_MAX_BROWSE = 100_000  # bounds a presence check on a huge DLQ
_RECEIVE_WAIT_SECONDS = 5.0


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_number": self.sequence_number,
            "status": str(self.status),
            "detail": self.detail,
            "original_message_id": self.original_message_id,
            "replay_message_id": self.replay_message_id,
        }


class NotReplayable(ValueError):
    """The dead-lettered message cannot be copied back as it is (the text names why, not its body)."""


def first_line(exc: Exception) -> str:
    """An SDK error's first line, without the `b"..."` wrapping pyamqp puts around the broker's text."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"""\bb(["'])(.*?)\1""", r"\2", line)


def text_of(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def optional_text(value: Any) -> str | None:
    """A message field as text: an AMQP message or correlation id may be a UUID, a number or bytes, as
    its sender wrote it (the SDK hands it over as is), and what shows it writes JSON."""
    return None if value is None else text_of(value)


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


def replay_message_id(original_message_id: object, dead_letter_sequence_number: int) -> str:
    """The copy's message id: the same for every replay of one DLQ message, so the broker de-duplicates.

    Total over every message id the SDK hands over (AMQP allows a string, binary, UUID or ulong; the
    SDK decodes UTF-8 binary to text and passes the rest as is): the short form is the id as the
    operator routes list it (``optional_text``); one that would pass the 128-character limit is
    replaced by the sha256 of its bytes. The sequence number keeps two messages' copies apart."""
    text = optional_text(original_message_id) or "message"
    candidate = f"{text}.replay.{dead_letter_sequence_number}"
    if len(candidate) <= _MAX_MESSAGE_ID_LENGTH:
        return candidate
    raw = original_message_id if isinstance(original_message_id, bytes) else text.encode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    return f"{digest}.replay.{dead_letter_sequence_number}"


def _replay_copy(message: ServiceBusReceivedMessage) -> ServiceBusMessage:
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.amqp import AmqpMessageBodyType

    if message.body_type != AmqpMessageBodyType.DATA:
        raise NotReplayable(
            f"its AMQP body type is {message.body_type.value}; replay copies data bodies only"
        )
    properties: dict[str | bytes, Any] = {
        text_of(key): text_of(value) if isinstance(value, bytes) else value
        for key, value in (message.application_properties or {}).items()
        if text_of(key) not in DEAD_LETTER_PROPERTIES
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
        original_message_id=optional_text(message.message_id),
    )
    try:
        copy = _replay_copy(message)
        sender.send_messages(copy)
    except (NotReplayable, ServiceBusError) as exc:
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


def replay_from(
    receiver: ServiceBusReceiver,
    sender: ServiceBusSender,
    destination: str,
    sequence_numbers: Sequence[int] | None,
    *,
    limit: int,
) -> list[ReplayResult]:
    """Move dead-lettered messages from ``receiver`` (a DLQ) back through ``sender`` to ``destination``.

    `sequence_numbers=None` means every message in the DLQ now (at most `limit`). Only sequence
    numbers that a peek finds in the DLQ are received. Each is received in peek-lock, its copy sent,
    then completed. Service Bus cannot receive by sequence number, so messages met on the way that
    are not wanted stay locked until the end and are then abandoned: they remain in the DLQ, their
    delivery count one higher. When a held message comes back (its lock ran out before the scan
    reached the wanted ones, on a long DLQ or a slow link), the scan stops instead of going round for
    ever: the wanted messages not reached are ``SEND_FAILED`` (nothing sent, still dead-lettered).
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
    held_numbers: set[int] = set()
    wrapped = False  # a held message came back: its lock ran out, the scan would go round for ever
    wanted = _present(receiver, sequence_numbers, limit)
    try:
        while wanted and not wrapped:
            # Full batches even for one wanted message: one round trip per message ahead made a long
            # DLQ outlast the locks of the first ones (a batch's later messages are abandoned too).
            batch = receiver.receive_messages(
                max_message_count=_RECEIVE_BATCH, max_wait_time=_RECEIVE_WAIT_SECONDS
            )
            if not batch:
                break
            for message in batch:
                sequence_number = int(message.sequence_number or 0)
                if sequence_number in wanted:
                    wanted.discard(sequence_number)
                    results[sequence_number] = _replay_one(receiver, sender, message, destination)
                else:
                    wrapped = wrapped or sequence_number in held_numbers
                    held_numbers.add(sequence_number)
                    held.append(message)
    finally:
        for message in held:
            # If abandoning fails the lock expires on its own; the message stays in the DLQ either way.
            with suppress(ServiceBusError):
                receiver.abandon_message(message)
    for number in wanted if wrapped else ():
        results[number] = ReplayResult(
            sequence_number=number,
            status=ReplayStatus.SEND_FAILED,
            detail="not sent, left in the DLQ: the messages ahead of it came back before it was reached "
            "(their locks ran out during the scan); replay it again",
        )
    return [results[number] for number in sorted(results)]


def _present(receiver: ServiceBusReceiver, sequence_numbers: Sequence[int] | None, limit: int) -> set[int]:
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
