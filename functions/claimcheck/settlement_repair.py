"""Finishing the settlement writes that a crash or a failure lost next to a proof of the effect.

Once the result row and the result event are durable, the consumer writes at once the claim's
completion, the work item's ``completed`` and the record's ``processed`` (``consumer_settlement``); each
alone proves the effect, and a crash may land any subset. A delivery admitted as a duplicate on one of
them, and the reconciler before it removes a ``processed`` object, call ``SettlementRepair.finish``,
which writes the claim's completion and the work item's ``completed`` where they are still missing:
without it the work item stays ``running`` for ever (the status API answers ``wait``), and once the
object is removed a later delivery finds neither the object nor a proof of its effect and dead-letters
it ``payload_missing``.

A repair never invents a result: the summary is the completed claim's, else the completed work
item's, else the one stored in the result row (durable before any of the three writes). Every write is
conditional on the row as read (the work item's ETag, the claim's), so repeated or concurrent repairs
are harmless.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from claimcheck.concurrently import both
from claimcheck.errors import IllegalTransition
from claimcheck.idempotency import AlreadyDone, IdempotencyLedger, Unfinished, result_effect_key
from claimcheck.results import result_row_key
from claimcheck.states import WorkItemState
from claimcheck.storage import EntityTable, Key
from claimcheck.workitems import WorkItemRecord, WorkItemStore

log = logging.getLogger(__name__)


class SettlementRepair:
    def __init__(self, *, ledger: IdempotencyLedger, work_items: WorkItemStore, results: EntityTable) -> None:
        self._ledger = ledger
        self._work_items = work_items
        self._results = results

    def finish(
        self,
        work_item_id: str,
        version: int,
        *,
        tenant_id: str,
        purpose: str,
        work_item: WorkItemRecord | None,
        claim: AlreadyDone | None = None,
        now: datetime,
    ) -> tuple[str, ...]:
        """Complete the claim and the work item of an effect another write proves done, where they are
        not yet; answers what it found missing and completed (``"claim"``, ``"work item"``; one another
        writer completed meanwhile, found on the conditional write's re-read, counts too), empty when
        nothing was missing.

        Call it only with a proof of the effect (the record ``processed``/``cleanup_pending``, the work
        item ``completed`` at this version, or the claim completed). ``work_item``: the row as the
        caller read it (its ETag conditions the move). ``claim``: the completed claim when the caller
        already read it (None: read here). A work item at another version is left alone (a newer one
        was confirmed: its own deliveries decide it), as is one the state table does not let move to
        ``completed`` (``failed`` once the deliveries ran out: the dead-letter says why). Raises when
        a write fails, so the caller neither completes its message nor removes the object.
        """
        this_version = (
            work_item is not None
            and work_item.version == version
            and (work_item.tenant_id, work_item.purpose) == (tenant_id, purpose)
        )
        item_open = this_version and work_item is not None and work_item.state is not WorkItemState.COMPLETED
        settled = claim or self._ledger.settlement_of(result_effect_key(work_item_id, version, purpose))
        if not item_open and isinstance(settled, AlreadyDone):
            return ()
        summary = self._summary(
            work_item_id, version, tenant_id, settled, work_item if this_version else None
        )
        if summary is None:
            log.warning(
                "settlement of %s v%d not repaired: no stored result to take its summary from",
                work_item_id,
                version,
            )
            return ()

        def complete_claim() -> bool:
            if isinstance(settled, AlreadyDone):
                return False
            self._ledger.complete_unfinished(settled, summary, now=now)
            return True

        def complete_work_item() -> bool:
            return item_open and self._complete_work_item(work_item, work_item_id, version, summary, now)

        # Independent rows: at once when both are missing.
        if item_open and isinstance(settled, Unfinished):
            claimed, moved = both(complete_claim, complete_work_item)
        else:
            claimed, moved = complete_claim(), complete_work_item()
        written = tuple(name for name, done in (("claim", claimed), ("work item", moved)) if done)
        if written:
            log.info(
                "settlement of %s v%d repaired: %s completed", work_item_id, version, " and ".join(written)
            )
        return written

    def _summary(
        self,
        work_item_id: str,
        version: int,
        tenant_id: str,
        settled: AlreadyDone | Unfinished,
        work_item: WorkItemRecord | None,
    ) -> Mapping[str, Any] | None:
        """The effect's summary as already recorded: the claim's, the work item's, or the result row's."""
        if isinstance(settled, AlreadyDone):
            return settled.result
        if work_item is not None and work_item.state is WorkItemState.COMPLETED and work_item.result:
            return work_item.result
        row = self._results.get(Key(work_item_id, result_row_key(version)))
        if row is None or row.values.get("tenant_id") != tenant_id or not row.values.get("summary"):
            return None
        summary: dict[str, Any] = json.loads(str(row.values["summary"]))
        return summary

    def _complete_work_item(
        self,
        known: WorkItemRecord | None,
        work_item_id: str,
        version: int,
        summary: Mapping[str, Any],
        now: datetime,
    ) -> bool:
        try:
            moved, _ = self._work_items.move_state(
                known, work_item_id, version, WorkItemState.COMPLETED, now=now, result=summary
            )
        except IllegalTransition:  # e.g. failed since (its deliveries ran out): the dead-letter says why
            log.warning(
                "work item %s v%d not completed by the repair: its state forbids it", work_item_id, version
            )
            return False
        return moved
