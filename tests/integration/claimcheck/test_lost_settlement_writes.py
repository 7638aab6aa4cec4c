"""Review of the settlement writes (docs/architecture.md §4, §8): a crash or failure that lands some of the
three writes after the effect (claim completed, work item ``completed``, record ``processed``) must leave a
state the redelivery, or the reconciler, finishes: the work item ends ``completed`` (an explicit final
state the status API and an agent's wait can act on), never ``running`` forever. Against Azurite.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from claimcheck import Complete, Retry
from claimcheck.idempotency import IN_PROGRESS, IdempotencyLedger
from claimcheck.states import WorkItemState
from claimcheck.workitems import WorkItemStore

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


class HostDied(Exception):
    """Stands for the worker dying while the work item's completion is on the wire (not an outage)."""


def _states(harness: Harness, table: str) -> list[str]:
    return [str(row.get("state", row.get("status"))) for row in harness.rows(table)]


@pytest.mark.parametrize("purpose", ["contract-review", "evidence-archive"])  # sync cleanup, retention
def test_a_lost_work_item_completion_is_finished_by_the_redelivery(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch, purpose: str
) -> None:
    harness = make_harness(claim_lease_seconds=600, claim_wait_seconds=1)
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose=purpose,
        classification="confidential",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    moves = WorkItemStore.move_state

    def lost_completion(self: WorkItemStore, *args: Any, **kwargs: Any) -> Any:
        if args[3] is WorkItemState.COMPLETED:
            raise HostDied
        return moves(self, *args, **kwargs)

    monkeypatch.setattr(WorkItemStore, "move_state", lost_completion)
    first = harness.claimcheck.consumer.handle(harness.delivery(count=1))
    assert isinstance(first, Retry)
    # What the failure left: the effect, the record processed, the work item still running.
    assert len(harness.results()) == 1
    assert _states(harness, harness.settings.registry_table) == ["processed"]
    assert _states(harness, harness.settings.work_items_table) == ["running"]
    monkeypatch.undo()

    redelivered = harness.claimcheck.consumer.handle(harness.delivery(count=2))
    assert isinstance(redelivered, Complete)
    redelivered.after_settlement()
    assert len(harness.analyzer.seen) == 1  # no second effect
    # The hole: the duplicate path completes the message and cleans up, but nobody writes the work
    # item's completed, so the status API answers running (next_action wait) for ever.
    assert _states(harness, harness.settings.work_items_table) == ["completed"]


def test_after_the_grace_an_effect_whose_claim_and_work_item_writes_were_lost_is_not_dead_lettered(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the record's processed landed (the claim's completion and the work item's were lost), and
    the redelivery comes after the reconciler finished the interrupted cleanup (lock lost, delivery
    delayed past CLAIMCHECK_INTERRUPTED_CLEANUP_GRACE_SECONDS): the object is gone, the claim is still
    in progress, the work item running, so admission sees GONE with no proof of the effect."""
    harness = make_harness(claim_lease_seconds=600, claim_wait_seconds=1)
    harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    _lose_claim_and_work_item_completions(harness, monkeypatch)
    harness.clock.advance(timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds + 1))
    report = harness.claimcheck.reconciler.run()
    assert len(report.interrupted_cleanups_finished) == 1
    assert harness.blob_names() == []

    redelivered = harness.claimcheck.consumer.handle(harness.delivery(count=2))

    assert len(harness.analyzer.seen) == 1
    # The effect exists (result row, result event): the delivery is a duplicate, and the work item
    # must end completed, not failed with payload_missing.
    assert isinstance(redelivered, Complete), redelivered
    assert _states(harness, harness.settings.work_items_table) == ["completed"]


def _lose_claim_and_work_item_completions(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first delivery makes the effect and lands only the record's processed."""
    moves = WorkItemStore.move_state

    def lost_completion(self: WorkItemStore, *args: Any, **kwargs: Any) -> Any:
        if args[3] is WorkItemState.COMPLETED:
            raise HostDied
        return moves(self, *args, **kwargs)

    def claim_lost(self: IdempotencyLedger, *args: Any, **kwargs: Any) -> None:
        raise HostDied

    with monkeypatch.context() as lost:
        lost.setattr(WorkItemStore, "move_state", lost_completion)
        lost.setattr(IdempotencyLedger, "complete", claim_lost)
        assert isinstance(harness.claimcheck.consumer.handle(harness.delivery(count=1)), Retry)
    assert _states(harness, harness.settings.registry_table) == ["processed"]
    assert _states(harness, harness.settings.idempotency_table) == [IN_PROGRESS]
    assert _states(harness, harness.settings.work_items_table) == ["running"]


def _recorded_summaries(harness: Harness) -> tuple[str, str, str]:
    """The summary as the result row, the work item and the claim hold it (JSON text)."""
    (row,) = harness.rows(harness.settings.results_table)
    (item,) = harness.rows(harness.settings.work_items_table)
    (claim,) = harness.rows(harness.settings.idempotency_table)
    return row["summary"], item["result"], claim["result"]


def test_a_duplicate_completes_the_lost_claim_and_work_item_from_the_result_row_before_its_cleanup(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the record's processed landed and the redelivery comes within the grace: it is a
    duplicate, completes the claim and the work item with the summary the result row holds (never a
    new one) before its message is completed and the object deleted, and a later delivery, the object
    gone, is still a duplicate."""
    harness = make_harness(claim_lease_seconds=600, claim_wait_seconds=1)
    harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",  # sync cleanup
        classification="confidential",
        content_type="text/plain",
    )
    _lose_claim_and_work_item_completions(harness, monkeypatch)

    redelivered = harness.claimcheck.consumer.handle(harness.delivery(count=2))
    assert isinstance(redelivered, Complete)
    # Repaired before the message is completed (the cleanup has not run: the object is still there).
    assert harness.blob_names() != []
    assert _states(harness, harness.settings.work_items_table) == ["completed"]
    assert _states(harness, harness.settings.idempotency_table) == ["completed"]
    stored, item, claim = _recorded_summaries(harness)
    assert json.loads(item) == json.loads(claim) == json.loads(stored)
    redelivered.after_settlement()
    assert harness.blob_names() == []
    assert _states(harness, harness.settings.registry_table) == ["removed"]

    late = harness.claimcheck.consumer.handle(harness.delivery(count=3))
    assert isinstance(late, Complete)
    assert len(harness.analyzer.seen) == 1
    assert len(harness.results()) == 1
    assert _states(harness, harness.settings.work_items_table) == ["completed"]
    assert harness.claimcheck.reconciler.run().settlements_repaired == []


def test_the_reconciler_completes_the_lost_claim_of_a_superseded_version_before_removing_its_object(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1's effect landed only its record's processed, and version 2 was confirmed since: the
    work item now speaks for version 2, so only the claim can prove version 1's effect once its object
    is gone. The reconciler completes it (from the result row) before the removal, and a late delivery
    of version 1 is a duplicate, not payload_missing."""
    harness = make_harness(claim_lease_seconds=600, claim_wait_seconds=1)
    first = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    _lose_claim_and_work_item_completions(harness, monkeypatch)
    second = harness.claimcheck.producer.submit(
        document(30_001),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
        work_item_id=first.work_item_id,
    )
    assert second.version == 2
    harness.clock.advance(timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds + 1))

    report = harness.claimcheck.reconciler.run()

    assert report.settlements_repaired == [first.payload_ref]
    assert report.interrupted_cleanups_finished == [first.payload_ref]
    (claim,) = harness.rows(harness.settings.idempotency_table)
    (row,) = harness.rows(harness.settings.results_table)
    assert claim["status"] == "completed"
    assert json.loads(claim["result"]) == json.loads(row["summary"])
    (item,) = harness.rows(harness.settings.work_items_table)
    assert (item["version"], item["state"]) == (2, "accepted")  # version 2's, left alone

    late = harness.claimcheck.consumer.handle(harness.delivery(0, count=2))
    assert isinstance(late, Complete), late
    assert len(harness.analyzer.seen) == 1
    (item,) = harness.rows(harness.settings.work_items_table)
    assert (item["version"], item["state"], item["failure_reason"]) == (2, "accepted", "")
