"""The effect's settlement writes go at once (``Consumer._settle``): the claim's completion, the work
item's ``completed`` and the record's ``processed``. A crash may land some of them and lose the others;
whatever it lost, the redelivery must complete as a duplicate (no second effect, no dead-letter) and,
for a stored object, finish the cleanup. Against Azurite: the landed rows are read from the tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from claimcheck import Complete, Retry
from claimcheck.idempotency import IN_PROGRESS, IdempotencyLedger

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


class HostDied(Exception):
    """Stands for the worker dying while the claim's completion is on the wire (not an outage)."""


def _states(harness: Harness, table: str) -> list[str]:
    return [str(row.get("state", row.get("status"))) for row in harness.rows(table)]


@pytest.mark.parametrize(
    ("classification", "size"),
    [("confidential", 30_000), ("internal", 300)],  # by reference (sync cleanup), inline
)
def test_a_lost_claim_completion_leaves_a_duplicate_not_a_second_effect(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch, classification: str, size: int
) -> None:
    # A long lease and a short wait: a redelivery that did not see the effect done would wait for the
    # dead attempt's claim in vain (Retry), or dead-letter on the processed record (access_denied).
    harness = make_harness(claim_lease_seconds=600, claim_wait_seconds=1)
    receipt = harness.claimcheck.producer.submit(
        document(size),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification=classification,
        content_type="text/plain",
    )

    def host_died(self: IdempotencyLedger, *args: Any, **kwargs: Any) -> None:
        raise HostDied

    monkeypatch.setattr(IdempotencyLedger, "complete", host_died)
    first = harness.claimcheck.consumer.handle(harness.delivery(count=1))
    assert isinstance(first, Retry)
    # What the crash left: the effect (result row, result event) and the writes sent with the claim's
    # completion, but the claim still in progress.
    assert len(harness.results()) == 1
    assert _states(harness, harness.settings.work_items_table) == ["completed"]
    assert _states(harness, harness.settings.idempotency_table) == [IN_PROGRESS]
    if receipt.payload_ref is not None:
        assert _states(harness, harness.settings.registry_table) == ["processed"]
    monkeypatch.undo()

    redelivered = harness.claimcheck.consumer.handle(harness.delivery(count=2))
    assert isinstance(redelivered, Complete)
    # The duplicate finished the lost write before its completion, from the work item's summary.
    assert _states(harness, harness.settings.idempotency_table) == ["completed"]
    redelivered.after_settlement()  # the message completed: the cleanup runs
    assert len(harness.analyzer.seen) == 1  # no second effect
    assert len(harness.results()) == 1
    assert len(harness.rows(harness.settings.results_table)) == 1
    if receipt.payload_ref is not None:
        assert harness.blob_names() == []
        assert _states(harness, harness.settings.registry_table) == ["removed"]
        assert len(harness.rows(harness.settings.audit_table)) == 1

    # A late duplicate, once the object is gone: the work item's completed version (and the claim the
    # redelivery completed) prove the effect.
    late = harness.claimcheck.consumer.handle(harness.delivery(count=3))
    assert isinstance(late, Complete)
    assert len(harness.analyzer.seen) == 1
    assert len(harness.results()) == 1
