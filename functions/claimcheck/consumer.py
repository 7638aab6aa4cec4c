"""The consumer pipeline: envelope → resolve → authorize → fetch + verify → analyze → idempotent
result write → result event; answers an ``Outcome`` for the Function App to settle. The cleanup per
policy is a ``Complete``'s ``after_settlement`` step, which the settler runs once the message is
completed (docs/architecture.md §9: never delete before the effect is confirmed and the message completed).
Resolving and authorizing a delivery (may it run, is it a duplicate, is it ahead of the producer?) is
``admission.py``; what is written once the effect is durable, and the cleanup step, is
``consumer_settlement.py``.

Every failure is classified into one of three answers: ``DeadLetter`` (a ``MessageRejected`` leaf,
with its reason), ``Retry`` with backoff (a ``RetryableError`` or an unexpected I/O failure), or,
once the delivery count reaches its bound, ``DeadLetter`` — never an endless retry.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, BinaryIO

from claimcheck import telemetry
from claimcheck.admission import Admission, Duplicate
from claimcheck.analysis import AnalysisError, AnalysisResult, Analyzer, leading_bytes_read
from claimcheck.cleanup import Cleaner
from claimcheck.concurrently import Settled, all_three, both, settled
from claimcheck.consumer_outcomes import (
    dead_letter_for,
    is_integrity_failure,
    mark_failed,
    rejection_for,
    retry_or_give_up,
)
from claimcheck.consumer_settlement import Settlement
from claimcheck.deliveries import DeliveryCounter
from claimcheck.envelope import Envelope, parse_envelope
from claimcheck.errors import (
    AccessDenied,
    ClaimCheckError,
    IllegalTransition,
    MessageRejected,
    ObjectNotFound,
    PayloadStoreError,
    ProcessingFailed,
    RecordExists,
    RetryableError,
)
from claimcheck.idempotency import (
    AlreadyDone,
    ClaimHeartbeat,
    IdempotencyLedger,
    result_effect_key,
)
from claimcheck.integrity import DEFAULT_CHUNK_BYTES, spool_verified
from claimcheck.messages import Bus, InboundMessage
from claimcheck.outcome import DeadLetter, DeadLetterReason, Outcome, compute_backoff
from claimcheck.policy import (
    UNRESOLVABLE,
    PurposePolicy,
    base_content_type,
)
from claimcheck.provenance import Stated
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.resilience import FailureStreak, is_outage
from claimcheck.results import result_event, result_key, result_row, result_summary
from claimcheck.routing import PayloadStores
from claimcheck.settings import Settings
from claimcheck.states import PayloadState, WorkItemState
from claimcheck.storage import EntityTable
from claimcheck.telemetry import Stage, consumption_span, stage
from claimcheck.workitems import WorkItemRecord, WorkItemStore

log = logging.getLogger(__name__)

_OUTAGE_BASE = timedelta(milliseconds=500)
_OUTAGE_MAX = timedelta(seconds=5)


@dataclass(frozen=True)
class _Work:
    envelope: Envelope
    record: PayloadRecord | None  # None for an inline payload
    policy: PurposePolicy
    key: str
    traceparent: str | None
    work_item: WorkItemRecord | None


class Consumer:
    def __init__(
        self,
        *,
        settings: Settings,
        stores: PayloadStores,
        registry: PayloadRegistry,
        work_items: WorkItemStore,
        ledger: IdempotencyLedger,
        deliveries: DeliveryCounter,
        results: EntityTable,
        cleaner: Cleaner,
        bus: Bus,
        analyzer: Analyzer,
        purposes: Mapping[str, PurposePolicy],
        identity: str,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
    ) -> None:
        self._settings = settings
        self._stores = stores
        self._registry = registry
        self._work_items = work_items
        self._ledger = ledger
        self._deliveries = deliveries
        self._results = results
        self._bus = bus
        self._analyzer = analyzer
        leading_bytes_read(analyzer)  # a misdeclared read bound is refused here, not at a delivery
        self._purposes = purposes
        self._identity = identity
        self._clock = clock
        self._sleep = sleep
        self._admission = Admission(
            settings=settings,
            registry=registry,
            work_items=work_items,
            ledger=ledger,
            purposes=purposes,
            identity=identity,
            clock=clock,
            sleep=sleep,
        )
        self._settlement = Settlement(
            registry=registry,
            work_items=work_items,
            ledger=ledger,
            results=results,
            cleaner=cleaner,
            purposes=purposes,
            clock=clock,
        )
        # Shared by all deliveries: an outage is logged once when it starts and once when it ends.
        self._dependencies = FailureStreak("the consumer's storage or Service Bus", log)

    @consumption_span
    def handle(self, message: InboundMessage) -> Outcome:
        """Process one delivery; never raises for a bad message, always answers an ``Outcome``.

        An outage of a dependency (storage or the broker unreachable) is waited out here, with backoff
        and bounded by ``outage_wait_seconds``, instead of answering Retry at once: a retry spends one
        of the message's few deliveries, and an outage of seconds must not spend them all.
        """
        stated: Stated | None = None
        outcome: Outcome
        failures = 0
        outage_budget = timedelta(seconds=self._settings.outage_wait_seconds)
        waited = timedelta(0)
        while True:
            try:
                envelope = parse_envelope(message.body)
                stated = Stated(envelope, message.session_id, message.application_properties)
                telemetry.describe(
                    envelope.work_item_id,
                    envelope.payload_version,
                    envelope.purpose,
                    "inline" if envelope.payload_ref is None else "reference",
                )
                outcome = self._process(stated, message)
                self._dependencies.succeeded()
                return outcome
            except (MessageRejected, PayloadStoreError) as rejected:
                outcome = dead_letter_for(rejected)
            except RetryableError as waiting:
                outcome = self._retry_or_give_up(message, str(waiting), waiting.gives_up_as)
            # The trigger's outermost boundary (the local host and the Functions binding call only this):
            # an outage is waited out; anything else, a bug included, is logged with its frames and
            # answered Retry, bounded by the delivery count, instead of escaping into the host.
            except Exception as unexpected:
                if is_outage(unexpected) and waited < outage_budget:
                    self._dependencies.failed(unexpected)  # logs the first failure of a streak only
                    failures += 1
                    delay = min(
                        compute_backoff(failures, base=_OUTAGE_BASE, max_backoff=_OUTAGE_MAX),
                        outage_budget - waited,
                    )
                    self._sleep(delay.total_seconds())
                    waited += delay
                    continue
                # Type and frames only: foreign exception texts may quote URLs or request details.
                log.error(
                    "unexpected %s on message %s\n%s",
                    type(unexpected).__name__,
                    message.message_id,
                    "".join(traceback.format_tb(unexpected.__traceback__)),
                )
                outcome = self._retry_or_give_up(
                    message, f"unexpected {type(unexpected).__name__}", DeadLetterReason.PROCESSING_FAILED
                )
            break
        if isinstance(outcome, DeadLetter):
            log.warning(
                "dead-letter %s: %s (message %s)",
                outcome.reason.value,
                outcome.description,
                message.message_id,
            )
            if stated is not None:
                self._mark_failed(stated, outcome.reason)
        return outcome

    def _process(self, stated: Stated, message: InboundMessage) -> Outcome:
        envelope = stated.envelope
        policy = self._purposes.get(envelope.purpose)
        if (
            policy is None
            or envelope.environment != self._settings.environment
            or self._identity not in policy.readers  # this consumer may not read for the purpose at all
        ):
            raise AccessDenied(UNRESOLVABLE)
        key = result_effect_key(envelope.work_item_id, envelope.payload_version, envelope.purpose)
        admitted = self._admission.admit(stated, policy, key)
        if isinstance(admitted, Duplicate):
            return self._settlement.duplicate(envelope, admitted)
        record = admitted.record
        traceparent = message.application_properties.get("traceparent")
        work = _Work(
            envelope,
            record,
            policy,
            key,
            traceparent if isinstance(traceparent, str) else None,
            admitted.work_item,
        )
        # Admitted: the claim, the running state and the download are independent, so a document of one
        # chunk is fetched at once with them (the bytes are read only now, after authorization). Which
        # of them counts is decided after: a completed effect discards the download, a failed download
        # releases the claim. A larger document is read only once the claim is held: next to its
        # transfer the claim's round trip is nothing, and a duplicate of a completed effect must not
        # pay a whole download to learn it.
        with stage(Stage.FETCH):
            claim = settled(lambda: self._claim_and_hold(key))
            mark_running = settled(lambda: self._running(work))
            if _fits_one_chunk(work):
                # The download on this thread (the pool's threads run read-ahead sequentially).
                fetched, claimed, running = all_three(settled(lambda: self._fetch(work)), claim, mark_running)
            else:
                claimed, running = both(claim, mark_running)
                fetched = Settled[BinaryIO]()
                if claimed.error is None and isinstance(claimed.value, ClaimHeartbeat):
                    fetched = settled(lambda: self._fetch(work))()
            if claimed.error is not None or isinstance(claimed.value, AlreadyDone):
                _discard(fetched)
            held = claimed.get()  # raises what the claim met (held by another attempt, an outage)
            if isinstance(held, ClaimHeartbeat):
                document = self._verified(work, fetched, held)
        if isinstance(held, AlreadyDone):
            known = running.value if running.error is None else None
            return self._settlement.effect_done(envelope, record, policy.cleanup, held.result, known)
        heartbeat = held
        try:
            work_item = running.get()
            summary = self._run(work, document)
        except BaseException:
            document.close()
            self._ledger.release_or_let_expire(heartbeat.stop())
            raise
        settled_effect = self._settlement.effect_done(
            envelope, record, policy.cleanup, summary, work_item, claim=heartbeat.stop()
        )
        log.info("completed %s v%d", envelope.work_item_id, envelope.payload_version)
        telemetry.completed(envelope.purpose)
        return settled_effect

    def _claim_and_hold(self, key: str) -> ClaimHeartbeat | AlreadyDone:
        """Claim the effect and start renewing its lease at once (a long download runs meanwhile)."""
        budget = timedelta(seconds=self._settings.claim_wait_seconds)
        claim = self._ledger.claim_waiting(key, clock=self._clock, sleep=self._sleep, budget=budget)
        if isinstance(claim, AlreadyDone):
            return claim
        return ClaimHeartbeat(self._ledger, claim, clock=self._clock).start()

    def _running(self, work: _Work) -> WorkItemRecord | None:
        """Mark the work item running; answers the row as written (None: not written, read it again).

        It goes before the claim's answer is known: a duplicate of a completed effect skips it when the
        admitted row already says so, and one that loses the race to the completion leaves it alone.
        """
        envelope, known = work.envelope, work.work_item
        if (
            known is not None
            and known.version == envelope.payload_version
            and known.state is WorkItemState.COMPLETED
        ):
            return known
        try:
            _, written = self._work_items.move_state(
                known,
                envelope.work_item_id,
                envelope.payload_version,
                WorkItemState.RUNNING,
                now=self._clock(),
            )
        except IllegalTransition:  # completed since it was admitted: this delivery is a duplicate
            return None
        return written

    def _run(self, work: _Work, opened: BinaryIO) -> dict[str, Any]:
        """Analyze the verified document and record the effect; answers the summary."""
        envelope = work.envelope
        with opened as document:
            try:
                with stage(Stage.ANALYZE):
                    analysis = self._analyzer.analyze(document, base_content_type(envelope.content_type))
            except AnalysisError as exc:
                raise ProcessingFailed(f"the analyzer cannot process this document: {exc}") from exc
        summary = result_summary(envelope, analysis, completed_at=self._clock())
        with stage(Stage.RESULT_WRITE):
            self._write_result(envelope, analysis, summary)
        with stage(Stage.RESULT_PUBLISH):
            self._bus.publish(
                self._settings.results_topic,
                result_event(
                    envelope,
                    analysis,
                    summary,
                    message_id=f"res-{work.key[:40]}",
                    # this span's context, so a subscriber continues the document's trace
                    traceparent=telemetry.message_context().get("traceparent", work.traceparent),
                ),
            )
        return summary

    def _fetch(self, work: _Work) -> BinaryIO:
        """The verified bytes (streamed, length, type and sha256 checked); raises the store's error.

        Only the analyzer's declared head is kept when it declares one; the whole object is verified
        either way."""
        envelope, record = work.envelope, work.record
        head_bytes = leading_bytes_read(self._analyzer)
        if record is None:
            assert envelope.payload_inline is not None
            return spool_verified(
                [envelope.payload_inline],
                expected_length=envelope.content_length,
                expected_sha256=envelope.checksum.value,
                content_type=envelope.content_type,
                head_bytes=head_bytes,
            )
        return self._stores.for_purpose(record.purpose).open_verified(
            record.ref,
            etag=record.object_etag,
            length=record.content_length,
            sha256=record.sha256,
            content_type=record.content_type,
            head_bytes=head_bytes,
        )

    def _verified(self, work: _Work, fetched: Settled[BinaryIO], heartbeat: ClaimHeartbeat) -> BinaryIO:
        """The fetched bytes; on failure the claim is released and what the store or the check found
        is raised as its dead-letter leaf."""
        if fetched.error is None:
            return fetched.get()
        self._ledger.release_or_let_expire(heartbeat.stop())
        record, exc = work.record, fetched.error
        if not isinstance(exc, PayloadStoreError):
            raise exc
        if record is not None and isinstance(exc, ObjectNotFound):
            self._registry.move(record, PayloadState.MISSING, now=self._clock())
        elif record is not None and is_integrity_failure(exc):
            # Keep the metadata and the object for investigation; never "make do" with other bytes.
            self._registry.move(record, PayloadState.INTEGRITY_FAILED, now=self._clock())
        raise rejection_for(exc) from exc

    def _write_result(self, envelope: Envelope, analysis: AnalysisResult, summary: Mapping[str, Any]) -> None:
        # Taken means an attempt that crashed before completing the ledger wrote it: same key, same effect.
        with contextlib.suppress(RecordExists):
            self._results.insert_if_absent(
                result_key(envelope), result_row(envelope, analysis, summary, completed_at=self._clock())
            )

    def _mark_failed(self, stated: Stated, reason: DeadLetterReason) -> None:
        try:
            mark_failed(self._work_items, stated, reason, now=self._clock())
        except ClaimCheckError as exc:  # storage failed: the dead-letter itself must still happen
            log.warning(
                "could not record failure of %s: %s", stated.envelope.work_item_id, type(exc).__name__
            )

    def _retry_or_give_up(self, message: InboundMessage, reason: str, last: DeadLetterReason) -> Outcome:
        def count() -> int:
            return self._deliveries.count(
                message.message_id, message.sequence_number, message.lock_token, now=self._clock()
            )

        return retry_or_give_up(
            message, reason, last, max_deliveries=self._settings.max_delivery_count, count=count
        )


def _fits_one_chunk(work: _Work) -> bool:
    """Whether the document is read in one request (inline in the envelope, or at most one chunk)."""
    return work.record is None or work.record.content_length <= DEFAULT_CHUNK_BYTES


def _discard(fetched: Settled[BinaryIO]) -> None:
    """Close a download that will not be used (its spool may be a temporary file)."""
    if fetched.error is None and fetched.value is not None:
        fetched.value.close()
