"""SettlementRepair's rules on in-memory tables (the crash points themselves are proven against Azurite
in tests/integration/claimcheck/test_lost_settlement_writes.py): it writes only what is missing, only
from a summary already recorded, conditionally, and a second repair writes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from claimcheck.errors import ConcurrencyConflict
from claimcheck.idempotency import Claimed, IdempotencyLedger, Unfinished, result_effect_key
from claimcheck.results import result_row_key
from claimcheck.settlement_repair import SettlementRepair
from claimcheck.states import WorkItemState
from claimcheck.storage import Key
from claimcheck.testing import InMemoryTable
from claimcheck.workitems import WorkItemRecord, WorkItemStore

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
SUMMARY = {"work_item_id": "wi-1", "version": 1, "obligations": 3}
PURPOSE = "contract-review"


class Stores:
    def __init__(self) -> None:
        self.ledger = IdempotencyLedger(InMemoryTable("idempotency"), lease=timedelta(minutes=10))
        self.work_items = WorkItemStore(InMemoryTable("workitems"))
        self.results = InMemoryTable("results")
        self.repair = SettlementRepair(ledger=self.ledger, work_items=self.work_items, results=self.results)
        self.key = result_effect_key("wi-1", 1, PURPOSE)

    def running_effect(self, *, stored_result: bool = True) -> WorkItemRecord:
        """Version 1 running, its claim in progress, and (by default) its result row written."""
        reserved = self.work_items.reserve("wi-1", tenant_id="tenant-a", purpose=PURPOSE, now=NOW, fresh=True)
        self.work_items.confirm_version("wi-1", 1, None, now=NOW, known=reserved)
        _, running = self.work_items.move_state(None, "wi-1", 1, WorkItemState.RUNNING, now=NOW)
        assert running is not None
        assert isinstance(self.ledger.begin(self.key, now=NOW), Claimed)
        if stored_result:
            self.results.insert_if_absent(
                Key("wi-1", result_row_key(1)), {"tenant_id": "tenant-a", "summary": json.dumps(SUMMARY)}
            )
        return running

    def finish(self, work_item: WorkItemRecord | None) -> tuple[str, ...]:
        return self.repair.finish(
            "wi-1", 1, tenant_id="tenant-a", purpose=PURPOSE, work_item=work_item, now=NOW
        )

    def item(self) -> WorkItemRecord:
        found = self.work_items.get("wi-1")
        assert found is not None
        return found


def test_both_lost_writes_are_completed_from_the_result_row_and_a_second_repair_writes_nothing() -> None:
    stores = Stores()
    running = stores.running_effect()

    assert stores.finish(running) == ("claim", "work item")

    assert (stores.item().state, stores.item().result) == (WorkItemState.COMPLETED, SUMMARY)
    done = stores.ledger.lookup(stores.key)
    assert done is not None
    assert done.result == SUMMARY
    completed = stores.item()
    assert stores.finish(completed) == ()
    # From a stale row (read as running before the repair): the move's ETag check fails, it reads the
    # row again and finds it completed, so nothing is written again.
    stores.finish(running)
    assert stores.item().etag == completed.etag


def test_without_a_recorded_summary_nothing_is_invented() -> None:
    stores = Stores()
    running = stores.running_effect(stored_result=False)

    assert stores.finish(running) == ()

    assert stores.item().state is WorkItemState.RUNNING
    assert stores.ledger.lookup(stores.key) is None


def test_a_failed_work_item_is_left_alone_and_another_tenants_rows_are_not_touched() -> None:
    stores = Stores()
    stores.running_effect()
    stores.work_items.set_state("wi-1", 1, WorkItemState.FAILED, now=NOW, failure_reason="payload_missing")

    assert stores.finish(stores.item()) == ("claim",)
    assert stores.item().state is WorkItemState.FAILED

    other = Stores()
    running = other.running_effect()
    # Another tenant's work item, and a result row of another tenant: nothing to take a summary from.
    assert (
        other.repair.finish("wi-1", 1, tenant_id="tenant-b", purpose=PURPOSE, work_item=running, now=NOW)
        == ()
    )
    assert other.item().state is WorkItemState.RUNNING
    assert other.ledger.lookup(other.key) is None


def test_a_claim_changed_since_it_was_read_is_completed_only_if_someone_completed_it() -> None:
    stores = Stores()
    stores.running_effect()
    stale = stores.ledger.settlement_of(stores.key)
    assert isinstance(stale, Unfinished)
    renewed = stores.ledger.renew(Claimed(stores.key, str(stale.etag)), now=NOW)  # a live holder renewed

    with pytest.raises(ConcurrencyConflict):
        stores.ledger.complete_unfinished(stale, SUMMARY, now=NOW)

    stores.ledger.complete(renewed, SUMMARY, now=NOW)  # the holder completed it after all
    stores.ledger.complete_unfinished(stale, {"other": 1}, now=NOW)  # finds it completed: no error
    done = stores.ledger.lookup(stores.key)
    assert done is not None
    assert done.result == SUMMARY
