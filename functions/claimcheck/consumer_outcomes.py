"""How the consumer turns what went wrong into an outcome: one table per source, and the retry bound.

``DENIALS``: the authorization verdicts (claimcheck.policy). ``rejection_for``: the payload store's
errors (claimcheck.errors ``PayloadStoreError`` leaves), so that the store speaks in storage terms and
only the consumer decides what they mean for a delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from claimcheck.deliveries import delivery_number
from claimcheck.errors import (
    AccessDenied,
    ClaimCheckError,
    ContentTypeMismatch,
    EnvelopeExpired,
    IntegrityFailed,
    MessageRejected,
    ObjectChanged,
    ObjectEmpty,
    ObjectExists,
    ObjectMismatch,
    ObjectNotFound,
    ObjectTooLarge,
    PayloadMissing,
    PayloadStoreError,
)
from claimcheck.messages import InboundMessage
from claimcheck.outcome import DeadLetter, DeadLetterReason, Outcome, Retry, compute_backoff
from claimcheck.policy import Verdict
from claimcheck.provenance import Stated, attributed
from claimcheck.states import WorkItemState, may_move
from claimcheck.workitems import WorkItemStore

log = logging.getLogger(__name__)

# Every verdict but ALLOW; NOT_YET_VISIBLE lands here only once the visibility grace has passed.
DENIALS: Mapping[Verdict, type[MessageRejected]] = {
    Verdict.UNRESOLVABLE: AccessDenied,
    Verdict.BLOCKED: AccessDenied,
    Verdict.EXPIRED: EnvelopeExpired,
    Verdict.NOT_YET_VISIBLE: PayloadMissing,
    Verdict.GONE: PayloadMissing,
    Verdict.CONTENT_TYPE_MISMATCH: ContentTypeMismatch,
}

# The payload store's errors while the consumer reads an object: (leaf, fixed reason or None to keep
# the store's own words, which name fields and never bytes).
STORE_REJECTIONS: Mapping[type[PayloadStoreError], tuple[type[MessageRejected], str | None]] = {
    ObjectNotFound: (PayloadMissing, "the registered object is gone (removed early or never completed)"),
    ObjectChanged: (IntegrityFailed, None),
    ObjectMismatch: (IntegrityFailed, None),  # a content_type mismatch: ContentTypeMismatch, below
    ObjectTooLarge: (IntegrityFailed, None),
    ObjectEmpty: (IntegrityFailed, None),
    ObjectExists: (IntegrityFailed, None),
}


def rejection_for(error: PayloadStoreError) -> MessageRejected:
    """The dead-letter leaf for a payload store error met while reading a delivery's object."""
    if isinstance(error, ObjectMismatch) and error.field == "content_type":
        return ContentTypeMismatch(str(error))
    leaf, reason = STORE_REJECTIONS[type(error)]
    return leaf(reason or str(error))


def dead_letter_for(error: MessageRejected | PayloadStoreError) -> DeadLetter:
    """The outcome of a delivery that can never succeed: its reason and description."""
    rejected = rejection_for(error) if isinstance(error, PayloadStoreError) else error
    return DeadLetter(rejected.reason, str(rejected))


def is_integrity_failure(error: PayloadStoreError) -> bool:
    """Bytes other than the recorded ones: the record moves to ``integrity_failed`` and is kept."""
    return isinstance(rejection_for(error), IntegrityFailed | ContentTypeMismatch)


def retry_or_give_up(
    message: InboundMessage,
    reason: str,
    last: DeadLetterReason,
    *,
    max_deliveries: int,
    count: Callable[[], int],
) -> Outcome:
    """Retry with backoff, or dead-letter with ``last`` once the delivery count reaches its bound.

    The broker's delivery count when the trigger reports it, else ``count()`` (the app's own).
    """
    try:
        deliveries = delivery_number(message.delivery_count, count)
    except ClaimCheckError as exc:  # the count's store failed: retry; the broker's own bound still holds
        log.warning("could not count deliveries of message %s (%s)", message.message_id, type(exc).__name__)
        return Retry(reason, compute_backoff(1))
    if deliveries >= max_deliveries:
        return DeadLetter(last, f"gave up after {deliveries} deliveries: {reason}")
    return Retry(reason, compute_backoff(deliveries))


def mark_failed(
    work_items: WorkItemStore, stated: Stated, reason: DeadLetterReason, *, now: datetime
) -> None:
    """Record a dead-lettered version's failure on its work item, if intake published this message.

    Only the message intake published for that version (claimcheck.provenance) may mark the work item:
    a forged, stale or re-addressed copy (unknown ref, other tenant, other session, moved expiry, old
    version) must not poison a legitimate one. And only as the state machine allows: a completed
    version stays completed, whatever a late delivery of it met.
    """
    envelope = stated.envelope
    target = WorkItemState.EXPIRED if reason is DeadLetterReason.EXPIRED else WorkItemState.FAILED
    work_item = work_items.get(envelope.work_item_id)
    if not attributed(stated, work_item):
        return
    assert work_item is not None
    if work_item.version != envelope.payload_version or not may_move(work_item.state, target):
        return
    work_items.move_state(
        work_item,
        envelope.work_item_id,
        envelope.payload_version,
        target,
        now=now,
        failure_reason=reason.value,
    )
