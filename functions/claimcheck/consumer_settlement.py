"""What the consumer writes once an effect is durable, and the cleanup it hands the settler.

``Settlement.effect_done`` is the end of a delivery that made (or found made) the effect: the claim
completed, the work item ``completed`` and the stored object ``processed``, at once; it answers
``Complete`` with the cleanup per policy as its ``after_settlement`` step, which the settler runs only
once the message is completed (docs/architecture.md §9: never delete before the effect is confirmed and the
message completed). ``Settlement.duplicate`` is the end of a delivery that repeats a completed effect: it
first finishes the settlement writes a crash lost (``settlement_repair``), then answers ``Complete``
with the interrupted cleanup, if any, as its step.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from claimcheck import telemetry
from claimcheck.admission import Duplicate
from claimcheck.cleanup import Cleaner
from claimcheck.concurrently import all_three
from claimcheck.envelope import Envelope
from claimcheck.errors import ConcurrencyConflict
from claimcheck.idempotency import Claimed, IdempotencyLedger
from claimcheck.outcome import Complete
from claimcheck.policy import CleanupPolicy, PurposePolicy
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.settlement_repair import SettlementRepair
from claimcheck.states import PayloadState, WorkItemState
from claimcheck.storage import EntityTable
from claimcheck.telemetry import Stage, stage
from claimcheck.workitems import WorkItemRecord, WorkItemStore

log = logging.getLogger(__name__)

_SETTLEABLE = (PayloadState.REF_PUBLISHED, PayloadState.AVAILABLE)


class Settlement:
    def __init__(
        self,
        *,
        registry: PayloadRegistry,
        work_items: WorkItemStore,
        ledger: IdempotencyLedger,
        results: EntityTable,
        cleaner: Cleaner,
        purposes: Mapping[str, PurposePolicy],
        clock: Callable[[], datetime],
    ) -> None:
        self._registry = registry
        self._work_items = work_items
        self._ledger = ledger
        self._repair = SettlementRepair(ledger=ledger, work_items=work_items, results=results)
        self._cleaner = cleaner
        self._purposes = purposes
        self._clock = clock

    def effect_done(
        self,
        envelope: Envelope,
        record: PayloadRecord | None,
        cleanup: CleanupPolicy,
        summary: Mapping[str, Any],
        work_item: WorkItemRecord | None,
        *,
        claim: Claimed | None = None,
    ) -> Complete:
        """After the effect is durable (result row written, result event published): the claim
        completed (``claim``: this delivery made the effect), the work item completed and the object
        (``record``; None when inline) ``processed``; answers Complete with the ``cleanup`` as its step.

        The three writes are independent rows, each conditioned on the row as this delivery last read
        or wrote it (re-read only on a lost race), so they go at once. None of them may go before the
        result event: each says the effect is done. A crash or a failure that lands any subset of
        them leaves a state the redelivery completes without a second effect (``admission.py``):

        - the record ``processed`` (whatever else was lost) → a duplicate at admission, whose
          ``duplicate`` completes the claim and the work item where they are still missing before it
          completes the message; past the interrupted-cleanup grace the reconciler does the same
          repair before it removes the object, so a later delivery finds the work item ``completed``
          (or, a newer version confirmed since, the claim completed) → a duplicate, never
          ``payload_missing``;
        - the claim completed, the record still readable → the claim's ``AlreadyDone`` comes back
          here and writes the work item and the record;
        - the work item ``completed`` with the object gone or inline → a duplicate at admission (its
          repair completes the claim);
        - the work item ``completed`` alone while the record is still readable → the dead attempt's
          claim is waited out and taken over, and the effect's writes find their rows (result row
          insert-if-absent, result event under the same message id, deduplicated by the topic).
        """
        now = self._clock()

        def complete_claim() -> None:
            if claim is not None:
                self._ledger.complete(claim, summary, now=now)

        _, settled_record, _ = all_three(
            complete_claim,
            lambda: None if record is None else self._processed(record, now),
            lambda: self._work_items.move_state(
                work_item,
                envelope.work_item_id,
                envelope.payload_version,
                WorkItemState.COMPLETED,
                now=now,
                result=summary,
            ),
        )
        if settled_record is None:
            return Complete()
        return Complete(
            self._after_settlement(lambda at: self._cleaner.after_effect(settled_record, cleanup, now=at))
        )

    def duplicate(self, envelope: Envelope, found: Duplicate) -> Complete:
        """Complete a delivery that repeats a completed effect (``found``: what admission read).

        First the settlement writes a crash or a failure lost next to the proof admission found are
        finished (the claim's completion, the work item's ``completed``, from the summary already
        recorded: ``SettlementRepair.finish``); a failing write raises, so the message is not completed
        and nothing is cleaned up. Then ``found.unfinished``, a record still ``processed`` or
        ``cleanup_pending`` (the attempt that settled the effect crashed, or its completion failed,
        before its cleanup), is cleaned up under its purpose's policy once this delivery's message is
        completed."""
        self._repair.finish(
            envelope.work_item_id,
            envelope.payload_version,
            tenant_id=envelope.tenant_id,
            purpose=envelope.purpose,
            work_item=found.work_item,
            claim=found.claim,
            now=self._clock(),
        )
        unfinished = found.unfinished
        if unfinished is None:
            return Complete()
        return Complete(
            self._after_settlement(
                lambda now: self._cleaner.finish_interrupted(unfinished, self._purposes, now=now)
            )
        )

    def _processed(self, record: PayloadRecord, now: datetime) -> PayloadRecord | None:
        """The record moved to ``processed``, or None when there is none to clean.

        ``processed`` whatever the policy: ``cleanup_pending`` is written by the after-settlement step
        only, once the message is completed, because the reconciler's sweep deletes a
        ``cleanup_pending`` object at once (docs/architecture.md §9: never delete before the message is
        completed). A crash or failed completion leaves ``processed``: the redelivery, or the reconciler after
        CLAIMCHECK_INTERRUPTED_CLEANUP_GRACE_SECONDS, finishes the cleanup.
        """
        target = PayloadState.PROCESSED
        if record.state in _SETTLEABLE:
            try:
                record = self._registry.move(record, target, now=now)
            except ConcurrencyConflict:  # changed since it was admitted (e.g. the producer's activation)
                record = self._registry.get(record.ref) or record
                if record.state in _SETTLEABLE:
                    record = self._registry.move(record, target, now=now)
        return record if record.state is target else None

    def _after_settlement(self, cleanup: Callable[[datetime], object]) -> Callable[[], None]:
        """``cleanup`` as a ``Complete``'s step: timed when it runs (so its proof is dated after the
        completion), in the delivery's trace, and never raising into the settler: a failure is logged
        (type and frames, no payload) and the record, ``processed`` or ``cleanup_pending`` where it
        stopped, is left to a redelivery or the reconciler (its sweep, or its interrupted-cleanup grace)."""

        def step() -> None:
            try:
                with stage(Stage.CLEANUP):
                    cleanup(self._clock())
            except Exception as failed:
                log.warning(
                    "cleanup after settlement left to reconciliation: %s\n%s",
                    type(failed).__name__,
                    "".join(traceback.format_tb(failed.__traceback__)),
                )

        return telemetry.in_current_trace(step)
