"""Admission of one delivery (docs/architecture.md §8): resolve its reference and work item, check that the
message is the one intake published for its version (claimcheck.provenance: the queue is untrusted input),
authorize the read, and learn whether it may run, duplicates an effect that already exists, or is
ahead of the producer's confirmation (polled a few times in-process, then ``NotYetVisible``). A
delivery that may never run raises a ``MessageRejected`` leaf; the consumer (``consumer.py``) runs what
is admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from claimcheck import telemetry
from claimcheck.concurrently import both
from claimcheck.consumer_outcomes import DENIALS
from claimcheck.envelope import Envelope
from claimcheck.errors import (
    AccessDenied,
    ContentTypeMismatch,
    EnvelopeExpired,
    IntegrityFailed,
    NotYetVisible,
    PayloadMissing,
    VersionMismatch,
)
from claimcheck.idempotency import AlreadyDone, IdempotencyLedger
from claimcheck.outcome import compute_backoff
from claimcheck.policy import PurposePolicy, ReadRequest, Verdict, authorize, base_content_type
from claimcheck.provenance import Stated, verify
from claimcheck.receipts import WriteReceipt
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.settings import Settings
from claimcheck.states import PayloadState, WorkItemState
from claimcheck.telemetry import Stage, stage
from claimcheck.workitems import WorkItemRecord, WorkItemStore

_POLL_BASE = timedelta(milliseconds=50)
_POLL_MAX = timedelta(seconds=1)


@dataclass(frozen=True)
class Duplicate:
    """This delivery repeats an effect that already exists, proven by one of the settlement writes
    (the record ``processed``/``cleanup_pending``, the work item ``completed`` at this version, or the
    claim completed). Before completing it, the settlement writes a crash lost are finished
    (``Settlement.duplicate``: the work item ``completed``, the claim's completion); once the completion
    succeeded, the cleanup of ``unfinished`` (still ``processed`` or ``cleanup_pending``: the attempt
    that settled the effect crashed, or its completion failed, before its cleanup)."""

    work_item: WorkItemRecord | None  # the row as read while admitting: its ETag conditions the repair
    unfinished: PayloadRecord | None = None
    claim: AlreadyDone | None = None  # the completed claim, when admission read it


@dataclass(frozen=True)
class Admitted:
    record: PayloadRecord | None  # None for an inline payload
    work_item: WorkItemRecord | None  # the row as read while admitting: its ETag conditions the moves


class Admission:
    def __init__(
        self,
        *,
        settings: Settings,
        registry: PayloadRegistry,
        work_items: WorkItemStore,
        ledger: IdempotencyLedger,
        purposes: Mapping[str, PurposePolicy],
        identity: str,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._work_items = work_items
        self._ledger = ledger
        self._purposes = purposes
        self._identity = identity
        self._clock = clock
        self._sleep = sleep

    def admit(self, stated: Stated, policy: PurposePolicy, key: str) -> Admitted | Duplicate:
        """Admitted (what was read, to run on), or Duplicate; raises when the delivery may not run."""
        return self._poll_until_visible(lambda: self._admit(stated, policy, key))

    def _poll_until_visible(self, admit: Callable[[], Admitted | Duplicate]) -> Admitted | Duplicate:
        """Bounded polling (docs/architecture.md §8): a message may arrive milliseconds before the producer
        confirms its version; wait with backoff a few times in-process before answering Retry."""
        attempt, waited = 1, 0.0
        try:
            while True:
                try:
                    return admit()
                except NotYetVisible:
                    if attempt >= self._settings.visibility_polls:
                        raise
                    delay = compute_backoff(attempt, base=_POLL_BASE, max_backoff=_POLL_MAX).total_seconds()
                    self._sleep(delay)
                    waited += delay
                    attempt += 1
        finally:
            if waited:
                telemetry.waited_for_visibility(waited)

    def _admit(self, stated: Stated, policy: PurposePolicy, key: str) -> Admitted | Duplicate:
        """Resolve and authorize, or learn that this delivery duplicates an existing effect.

        The registry record and the work item row are independent point reads: both go at once. Nothing
        else happens before the message is known to be the one intake published (``verify``): a forged
        one must not even count as a duplicate, whose settlement finishes writes.
        """
        now = self._clock()
        envelope = stated.envelope
        ref = envelope.payload_ref
        with stage(Stage.RESOLVE):
            found, work_item = both(
                lambda: None if ref is None else self._registry.get(ref),
                lambda: self._work_items.get(envelope.work_item_id),
            )
        receipt = verify(stated, work_item)  # raises AccessDenied for any other message
        if now >= envelope.expires_at:
            raise EnvelopeExpired("the envelope expired before processing")
        record: PayloadRecord | None = None
        if ref is not None:
            resolved = self._resolve(envelope, found, work_item, key, now)
            if isinstance(resolved, Duplicate):
                return _recorded(resolved, receipt, envelope)
            record = resolved
        self._check_inline_policy(envelope, policy)
        duplicate = self._check_confirmed_version(envelope, work_item, key, now)
        return _recorded(duplicate or Admitted(record, work_item), receipt, envelope)

    def _resolve(
        self,
        envelope: Envelope,
        record: PayloadRecord | None,
        work_item: WorkItemRecord | None,
        key: str,
        now: datetime,
    ) -> PayloadRecord | Duplicate:
        assert envelope.payload_ref is not None
        request = ReadRequest(
            identity=self._identity,
            work_item_id=envelope.work_item_id,
            tenant_id=envelope.tenant_id,
            purpose=envelope.purpose,
            environment=envelope.environment,
            classification=envelope.classification.value,
            version=envelope.payload_version,
            content_type=envelope.content_type,
            expires_at=envelope.expires_at,
            now=now,
        )
        with stage(Stage.AUTHORIZE):
            verdict, reason = authorize(request, None if record is None else record.facts(), self._purposes)
        if verdict is Verdict.ALLOW:
            assert record is not None
            if (record.content_length, record.sha256) != (envelope.content_length, envelope.checksum.value):
                raise IntegrityFailed("the envelope's length or checksum differs from the registered object")
            return record
        if verdict is not Verdict.UNRESOLVABLE:
            assert record is not None
            if record.state in (PayloadState.PROCESSED, PayloadState.CLEANUP_PENDING):
                # Written only once the effect is durable (``Settlement.effect_done``, at once with the
                # claim's completion and the work item's, which a crash may have lost): the record
                # itself proves it.
                return Duplicate(work_item, unfinished=record)
            if _completed(envelope, work_item):
                return Duplicate(work_item)  # of a completed effect whose object is gone
            done = self._ledger.lookup(key)
            if done is not None:
                return Duplicate(work_item, claim=done)
        if verdict is Verdict.NOT_YET_VISIBLE:
            assert record is not None
            self._retry_within_grace(record.created_at, now, "the producer has not confirmed this version")
        raise DENIALS[verdict](reason)

    def _check_inline_policy(self, envelope: Envelope, policy: PurposePolicy) -> None:
        if envelope.payload_inline is None:
            return
        if envelope.classification.sensitive or envelope.classification not in policy.classifications:
            raise AccessDenied("policy does not allow this classification inline for this purpose")
        if base_content_type(envelope.content_type) not in policy.content_types:
            raise ContentTypeMismatch("the declared content type is not allowed for this purpose")

    def _check_confirmed_version(
        self, envelope: Envelope, work_item: WorkItemRecord | None, key: str, now: datetime
    ) -> Duplicate | None:
        """Process only the version the producer confirmed (None: go on). An older version has been
        superseded (dead-letter), unless its effect already exists: then this delivery is a duplicate."""
        confirmed = 0 if work_item is None else work_item.version
        if confirmed < envelope.payload_version:
            self._retry_within_grace(envelope.created_at, now, "the work item version is not confirmed yet")
            raise PayloadMissing("the producer never confirmed this version (publish not completed)")
        if envelope.payload_ref is None and _completed(envelope, work_item):
            return Duplicate(work_item)  # inline: nothing to clean, and the claim's completion may be lost
        if confirmed > envelope.payload_version:
            done = self._ledger.lookup(key)
            if done is not None:
                return Duplicate(work_item, claim=done)
            raise VersionMismatch(f"version {envelope.payload_version} was superseded by version {confirmed}")
        return None

    def _retry_within_grace(self, since: datetime, now: datetime, why: str) -> None:
        """Inside the grace window, not yet visible means retry (raise); after it, the caller classifies."""
        if now < since + timedelta(seconds=self._settings.visibility_grace_seconds):
            raise NotYetVisible(why)


def _recorded(
    admitted: Admitted | Duplicate,
    receipt: WriteReceipt | None,
    envelope: Envelope,
) -> Admitted | Duplicate:
    """``admitted``, if intake recorded this message (``receipt``): a message without a receipt of its
    version may neither run nor, as a duplicate, finish settlement writes. The paths above refuse or
    retry it already (a version above the confirmed one, or one superseded); this keeps it so for a
    version whose receipt is no longer kept (``_KEPT_RECEIPTS``), which nothing can verify."""
    if receipt is not None:
        return admitted
    raise AccessDenied(f"intake keeps no receipt of version {envelope.payload_version} of this work item")


def _completed(envelope: Envelope, work_item: WorkItemRecord | None) -> bool:
    """Whether the work item says this envelope's effect is done: ``completed`` is written only once
    the result row and the result event are durable (``Settlement.effect_done``, at once with the
    claim's completion), or by a repair that found another proof of it (``settlement_repair``), so it
    proves the effect even when a crash lost the claim's."""
    return (
        work_item is not None
        and work_item.state is WorkItemState.COMPLETED
        and (work_item.version, work_item.tenant_id, work_item.purpose)
        == (envelope.payload_version, envelope.tenant_id, envelope.purpose)
    )
