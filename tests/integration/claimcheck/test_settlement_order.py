"""Cleanup after settlement (docs/architecture.md §4: never delete before the message is completed),
through the trigger itself: functions/function_app.py's ``consume_document`` with the harness's ClaimCheck on
Azurite. Its ServiceBusMessageActions stand-in notes which objects the store still holds at each
settlement call, so the order is read from the real store, not from a call log of our own code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import function_app
import pytest
from claimcheck import Complete
from claimcheck.adapters import servicebus as servicebus_adapter
from claimcheck.adapters.blobs import AzureBlobPayloadStore
from claimcheck.errors import StorageUnavailable
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.states import PayloadState

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]

pytestmark = pytest.mark.usefixtures("trigger_on_harness")

# An exception's text, which the log of a failed cleanup must not quote (it may name URLs or requests).
DETAIL = "blob delete: storage unreachable at some-url"


class SettlementFailed(Exception):
    """What the binding extension raises when the broker refuses a settlement (lock lost, broker down)."""


class Actions:
    """ServiceBusMessageActions for one delivery: each call records the blobs stored at that moment."""

    def __init__(self, harness: Harness, *, complete_fails: bool = False) -> None:
        self._harness = harness
        self._complete_fails = complete_fails
        self.calls: list[tuple[str, list[str]]] = []

    def complete(self, message: Any) -> None:
        self.calls.append(("complete", self._harness.blob_names()))
        if self._complete_fails:
            raise SettlementFailed("the message's lock was lost")

    def abandon(self, message: Any) -> None:
        self.calls.append(("abandon", self._harness.blob_names()))

    def deadletter(self, message: Any, **reason: str) -> None:
        self.calls.append(("deadletter", self._harness.blob_names()))


@pytest.fixture
def harness(make_harness: Build) -> Harness:
    return make_harness()


@pytest.fixture
def trigger_on_harness(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger runs the harness's ClaimCheck; the harness delivers the consumer's own
    InboundMessage, so the SDK message's conversion is the identity here."""
    monkeypatch.setattr(function_app, "claimcheck", lambda: harness.claimcheck)
    monkeypatch.setattr(servicebus_adapter, "inbound_message", lambda message: message)


def _submit_sync_cleanup(harness: Harness) -> str:
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",  # sync cleanup
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    return receipt.payload_ref


def _states(harness: Harness) -> list[str]:
    return [row["state"] for row in harness.rows(harness.settings.registry_table)]


def _proofs(harness: Harness) -> list[dict[str, Any]]:
    return harness.rows(harness.settings.audit_table)


def test_the_trigger_completes_the_message_before_it_deletes_the_object(harness: Harness) -> None:
    ref = _submit_sync_cleanup(harness)
    actions = Actions(harness)
    function_app.consume_document(harness.delivery(), actions)
    assert actions.calls == [("complete", [ref])]  # the object was still stored when completed
    assert harness.blob_names() == []
    assert _states(harness) == ["removed"]
    (proof,) = _proofs(harness)
    assert (proof["previous_state"], proof["object_existed"]) == ("processed", True)


def test_a_failed_completion_deletes_nothing_and_the_redelivery_finishes_the_cleanup(
    harness: Harness,
) -> None:
    ref = _submit_sync_cleanup(harness)
    failing = Actions(harness, complete_fails=True)
    with pytest.raises(SettlementFailed):  # the host sees the failed completion, as without cleanup
        function_app.consume_document(harness.delivery(count=1), failing)
    assert failing.calls == [("complete", [ref])]
    assert harness.blob_names() == [ref]  # nothing deleted: the message is not completed
    assert _states(harness) == ["processed"]  # not cleanup_pending, which the sweep deletes at once
    assert _proofs(harness) == []

    # The broker redelivers: a duplicate of the completed effect, completed before it cleans up.
    redelivery = Actions(harness)
    function_app.consume_document(harness.delivery(count=2), redelivery)
    assert redelivery.calls == [("complete", [ref])]
    assert len(harness.analyzer.seen) == 1  # no second effect
    assert harness.blob_names() == []
    assert _states(harness) == ["removed"]
    (proof,) = _proofs(harness)
    assert (proof["previous_state"], proof["object_existed"]) == ("processed", True)


def test_a_failed_completion_left_to_the_sweep_is_removed_with_proof(harness: Harness) -> None:
    ref = _submit_sync_cleanup(harness)
    with pytest.raises(SettlementFailed):
        function_app.consume_document(harness.delivery(), Actions(harness, complete_fails=True))
    assert harness.blob_names() == [ref]
    assert harness.claimcheck.reconciler.run().interrupted_cleanups_finished == []  # within the grace
    later = harness.clock.now + timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds)
    report = harness.claimcheck.reconciler.run(later)  # no redelivery came: the backstop
    assert report.interrupted_cleanups_finished == [ref]
    assert harness.blob_names() == []
    assert _states(harness) == ["removed"]
    assert len(_proofs(harness)) == 1


@pytest.mark.parametrize("purpose", ["contract-review", "bulk-ingest"])  # sync, async
def test_a_reconcile_run_before_the_completion_deletes_nothing(harness: Harness, purpose: str) -> None:
    """Between the consumer's answer and the message's completion the record says ``processed``, which
    the reconciler leaves alone within its grace: only the after-settlement step writes the
    ``cleanup_pending`` its sweep deletes at once."""
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose=purpose,
        classification="internal",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    outcome = harness.claimcheck.consumer.handle(harness.delivery())  # answered, not yet completed
    report = harness.claimcheck.reconciler.run()
    assert (report.cleaned_up, report.interrupted_cleanups_finished) == ([], [])
    assert harness.blob_names() == [receipt.payload_ref]
    assert isinstance(outcome, Complete)
    outcome.after_settlement()  # the message completed: now the policy applies
    swept = harness.claimcheck.reconciler.run().cleaned_up
    assert harness.blob_names() == []
    assert swept == ([] if purpose == "contract-review" else [receipt.payload_ref])


def test_a_cleanup_failing_after_the_completion_is_logged_not_raised_and_finished_after_the_grace(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The sync cleanup deletes straight from ``processed``: a failed delete leaves the record there,
    which the reconciler leaves to the consumer within the interrupted-cleanup grace and finishes after."""
    ref = _submit_sync_cleanup(harness)

    def storage_down(self: AzureBlobPayloadStore, ref: str) -> bool:
        raise StorageUnavailable(DETAIL)

    monkeypatch.setattr(AzureBlobPayloadStore, "delete", storage_down)
    actions = Actions(harness)
    with caplog.at_level(logging.WARNING, logger="claimcheck.consumer_settlement"):
        function_app.consume_document(harness.delivery(), actions)  # no raise
    assert actions.calls == [("complete", [ref])]
    (logged,) = [
        record.getMessage() for record in caplog.records if record.name == "claimcheck.consumer_settlement"
    ]
    assert logged.startswith("cleanup after settlement left to reconciliation: StorageUnavailable")
    assert DETAIL not in logged  # the type and frames only, never the exception's text
    assert harness.blob_names() == [ref]
    assert _states(harness) == ["processed"]

    monkeypatch.undo()
    within = harness.claimcheck.reconciler.run()
    assert (within.cleaned_up, within.interrupted_cleanups_finished, within.flagged_missing) == ([], [], [])
    later = harness.clock.now + timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds)
    assert harness.claimcheck.reconciler.run(later).interrupted_cleanups_finished == [ref]
    assert harness.blob_names() == []
    assert _states(harness) == ["removed"]
    (proof,) = _proofs(harness)
    assert (proof["previous_state"], proof["object_existed"]) == ("processed", True)


def test_a_sync_cleanup_interrupted_after_its_delete_is_not_flagged_missing(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync cleanup deletes straight from ``processed`` (no ``cleanup_pending`` write first): a
    crash after its delete leaves a processed record whose object is gone. The reconciler must not flag
    it ``missing`` (its object was due for deletion): within the grace it leaves it alone, after the
    grace it moves it to ``removed`` with a proof that the object was already gone."""
    ref = _submit_sync_cleanup(harness)
    outcome = harness.claimcheck.consumer.handle(harness.delivery())
    assert isinstance(outcome, Complete)

    def host_died(self: PayloadRegistry, record: PayloadRecord, target: PayloadState, **kwargs: Any) -> Any:
        if target is PayloadState.REMOVED:
            raise RuntimeError("the worker died after the delete")
        return moving(self, record, target, **kwargs)

    moving = PayloadRegistry.move
    monkeypatch.setattr(PayloadRegistry, "move", host_died)
    outcome.after_settlement()  # logged, not raised (as by the trigger)
    monkeypatch.undo()
    assert harness.blob_names() == []
    assert _states(harness) == ["processed"]

    within = harness.claimcheck.reconciler.run()
    assert (within.flagged_missing, within.interrupted_cleanups_finished, within.alerts) == ([], [], [])
    assert _states(harness) == ["processed"]
    later = harness.clock.now + timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds)
    assert harness.claimcheck.reconciler.run(later).interrupted_cleanups_finished == [ref]
    assert _states(harness) == ["removed"]
    assert sorted((proof["previous_state"], proof["object_existed"]) for proof in _proofs(harness)) == [
        ("processed", False),  # the reconciler's: the object was already gone
        ("processed", True),  # the interrupted step's, written at once with its failed move
    ]
