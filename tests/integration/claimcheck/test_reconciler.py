"""Reconciliation and cleanup policies against Azurite."""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Callable
from datetime import timedelta

import pytest
from claimcheck import ClaimCheck, Complete, DeadLetter, DeadLetterReason
from claimcheck.adapters.blobs import AzureBlobPayloadStore
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.deadletters import DeadLetterCount
from claimcheck.errors import BrokerUnavailable, StorageUnavailable
from claimcheck.registry import PayloadRegistry
from claimcheck.states import PayloadState
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


def states(harness: Harness) -> list[str]:
    return [row["state"] for row in harness.rows(harness.settings.registry_table)]


def test_async_cleanup_waits_for_the_sweep(make_harness: Build) -> None:
    """Async policy marks cleanup_pending after the effect; the reconciler deletes and leaves proof."""
    harness = make_harness()
    harness.claimcheck.producer.submit(
        io.BytesIO(document(90_000)),
        tenant_id="tenant-a",
        purpose="bulk-ingest",
        classification="internal",
        content_type="text/plain",
    )
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert states(harness) == ["cleanup_pending"]
    assert len(harness.blob_names()) == 1
    report = harness.claimcheck.reconciler.run()
    assert len(report.cleaned_up) == 1
    assert harness.blob_names() == []
    assert states(harness) == ["removed"]
    assert [row["reason"] for row in harness.rows(harness.settings.audit_table)] == [
        "asynchronous cleanup sweep"
    ]


def test_retained_object_is_removed_only_after_retention(make_harness: Build) -> None:
    """Retain policy keeps the processed object until its retention period has elapsed."""
    harness = make_harness()
    harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="evidence-archive",
        classification="restricted",
        content_type="text/plain",
    )
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert harness.claimcheck.reconciler.run().retention_removed == []
    assert states(harness) == ["processed"]
    report = harness.claimcheck.reconciler.run(harness.clock.now + timedelta(days=31))
    assert len(report.retention_removed) == 1
    assert harness.blob_names() == []


def test_published_reference_whose_object_is_gone_is_flagged(make_harness: Build) -> None:
    """An available record without its object is flagged missing, with an alert naming the consequence."""
    harness = make_harness()
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    harness.container.delete_blob(receipt.payload_ref)
    report = harness.claimcheck.reconciler.run()
    assert report.flagged_missing == [receipt.payload_ref]
    assert any("payload_missing" in alert for alert in report.alerts)
    assert states(harness) == ["missing"]


def test_unregistered_provisional_object_is_removed_after_grace(make_harness: Build) -> None:
    """A provisional object with no registry record (crash after upload) is removed after the grace period."""
    harness = make_harness()
    store = AzureBlobPayloadStore(harness.container)
    store.upload_provisional(
        "ref_" + "z" * 27, io.BytesIO(document(1000)), content_type="text/plain", max_bytes=10**6
    )
    assert harness.claimcheck.reconciler.run().orphans_removed == []
    later = harness.claimcheck.reconciler.run(harness.clock.now + timedelta(hours=2))
    assert later.orphans_removed == ["ref_" + "z" * 27]
    assert harness.blob_names() == []
    (proof,) = harness.rows(harness.settings.audit_table)
    assert proof["previous_state"] == "unregistered"


def _submit_losing(harness: Harness, monkeypatch: pytest.MonkeyPatch, target: object, method: str) -> None:
    """Submit while one request of the producer's last step (record's move, tag, confirmation) fails."""
    original = getattr(target, method)

    def crash(*args: object, **kwargs: object) -> object:
        if method == "move" and args[1] is not PayloadState.AVAILABLE:
            return original(*args, **kwargs)
        raise SystemError("producer process died")

    monkeypatch.setattr(target, method, crash)
    with pytest.raises(SystemError):
        harness.claimcheck.producer.submit(
            document(30_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="restricted",
            content_type="text/plain",
            work_item_id="wi-crashed",
        )
    monkeypatch.undo()


def test_a_lost_activation_is_finished_by_reconciliation(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish confirmed, record available and version confirmed, but the tag's activation was lost:
    reconciliation activates the object, so the lifecycle backstop never removes a readable object."""
    harness = make_harness()
    _submit_losing(
        harness, monkeypatch, harness.claimcheck.producer._stores.for_purpose("contract-review"), "activate"
    )
    assert states(harness) == ["available"]
    view = harness.claimcheck.status.get("wi-crashed")
    assert view is not None
    assert (view.state, view.version) == ("accepted", 1)
    (ref,) = harness.blob_names()
    tag = harness.settings.provisional_tag
    blob = harness.container.get_blob_client(ref)
    assert blob.get_blob_tags() == {tag.name: tag.value}
    report = harness.claimcheck.reconciler.run()
    assert report.activations_finished == [ref]
    assert blob.get_blob_tags() != {tag.name: tag.value}
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()


def test_a_lost_record_move_is_finished_by_reconciliation(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish confirmed and version confirmed, but the record's move was lost (still preparing): past the
    activation grace, reconciliation sees the confirmed version and finishes the activation instead of
    removing the object as an orphan; the delivery then completes."""
    harness = make_harness()
    _submit_losing(harness, monkeypatch, harness.claimcheck.producer._registry, "move")
    assert states(harness) == ["preparing"]
    assert not isinstance(
        consume_and_settle(harness.claimcheck.consumer, harness.delivery()), Complete
    )  # not visible yet
    grace = timedelta(seconds=harness.settings.visibility_grace_seconds + 1)
    harness.clock.advance(grace)
    report = harness.claimcheck.reconciler.run()
    assert (report.orphans_removed, states(harness)) == ([], ["ref_published"])
    harness.clock.advance(grace)
    assert len(harness.claimcheck.reconciler.run().activations_finished) == 1
    assert states(harness) == ["available"]
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=2)) == Complete()


def test_a_reservation_a_storage_outage_kept_from_release_is_released_after_the_grace(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage fails mid-intake: the upload, then the producer's own release of the generated id's
    reservation. Intake answers 503 and the client's retry makes its own work item, so the first row
    belongs to an id nobody was given and nothing confirms. Past the orphan grace reconciliation releases
    it (it stayed for ever before); a confirmed work item, a caller's own id and the row within the grace
    stay."""
    harness = make_harness()
    producer = harness.claimcheck.producer

    def storage_down(*_: object, **__: object) -> object:
        raise StorageUnavailable("storage did not answer (ServiceRequestError)")

    monkeypatch.setattr(producer._stores.for_purpose("contract-review"), "upload_provisional", storage_down)
    monkeypatch.setattr(producer._work_items, "release_fresh", storage_down)
    submit = functools.partial(
        producer.submit,
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    with pytest.raises(StorageUnavailable):
        submit(document(30_000))
    monkeypatch.undo()
    (left,) = harness.rows(harness.settings.work_items_table)
    assert (left["version"], left["pending_version"]) == (0, 1)
    accepted = submit(document(30_000))
    # A caller's own id whose first version was never confirmed stays: its caller may submit it again,
    # and a version of it may have been published already (its number is never used twice).
    producer._work_items.reserve(
        "wi-callers-own", tenant_id="tenant-a", purpose="contract-review", now=harness.clock.now
    )
    assert harness.claimcheck.reconciler.run().reservations_released == []  # within the grace
    harness.clock.advance(timedelta(seconds=harness.settings.orphan_grace_seconds + 1))
    report = harness.claimcheck.reconciler.run()
    assert report.reservations_released == [left["PartitionKey"]]
    assert sorted(row["PartitionKey"] for row in harness.rows(harness.settings.work_items_table)) == sorted(
        [accepted.work_item_id, "wi-callers-own"]
    )
    assert harness.claimcheck.reconciler.run().reservations_released == []


def test_revoked_object_is_not_read_and_not_deleted(make_harness: Build) -> None:
    """After revocation a delivery dead-letters access_denied; the object and its metadata stay."""
    harness = make_harness()
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    assert harness.claimcheck.reconciler.revoke(receipt.payload_ref, why="investigation INC-7")
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    assert states(harness) == ["access_denied"]
    assert harness.blob_names() == [receipt.payload_ref]
    assert not harness.claimcheck.reconciler.revoke(receipt.payload_ref, why="again")


def _crash_before_cleanup(harness: Harness, *, left: str) -> str:
    """Process a sync-cleanup document whose consumer dies (or whose completion fails) before its
    after-settlement step: the consumer answered Complete and left the record ``processed``.
    ``left="cleanup_pending"``: the step ran its first write (processed -> cleanup_pending), then died
    before the delete."""
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    assert harness.claimcheck.consumer.handle(harness.delivery()) == Complete()  # the step is not run
    assert states(harness) == ["processed"]
    if left == "cleanup_pending":
        registry = PayloadRegistry(
            AzureEntityTable(harness.tables.get_table_client(harness.settings.registry_table))
        )
        record = registry.get(receipt.payload_ref)
        assert record is not None
        registry.move(record, PayloadState.CLEANUP_PENDING, now=harness.clock.now)
    assert states(harness) == [left]
    assert harness.blob_names() == [receipt.payload_ref]
    return receipt.payload_ref


def test_sync_cleanup_interrupted_after_processed_is_finished_by_reconciliation(make_harness: Build) -> None:
    """A crash between processed and the sync cleanup: after the grace the reconciler deletes, with proof."""
    harness = make_harness()
    ref = _crash_before_cleanup(harness, left="processed")
    assert harness.claimcheck.reconciler.run().interrupted_cleanups_finished == []  # inside the grace
    later = harness.clock.now + timedelta(seconds=harness.settings.interrupted_cleanup_grace_seconds)
    report = harness.claimcheck.reconciler.run(later)
    assert report.interrupted_cleanups_finished == [ref]
    assert harness.blob_names() == []
    assert states(harness) == ["removed"]
    (proof,) = harness.rows(harness.settings.audit_table)
    assert proof["previous_state"] == "processed"
    assert "interrupted" in proof["reason"]


def test_sync_cleanup_interrupted_after_cleanup_pending_is_finished_by_the_next_sweep(
    make_harness: Build,
) -> None:
    """The step's first write says the object is to be deleted (then it died): the next run deletes it."""
    harness = make_harness()
    ref = _crash_before_cleanup(harness, left="cleanup_pending")
    report = harness.claimcheck.reconciler.run()
    assert report.cleaned_up == [ref]
    assert harness.blob_names() == []
    assert states(harness) == ["removed"]
    (proof,) = harness.rows(harness.settings.audit_table)
    assert proof["previous_state"] == "cleanup_pending"


@pytest.mark.parametrize("left", ["processed", "cleanup_pending"])
def test_redelivery_after_interrupted_cleanup_finishes_it(make_harness: Build, left: str) -> None:
    """The redelivery completes as a duplicate (no second effect) and finishes the cleanup itself."""
    harness = make_harness()
    _crash_before_cleanup(harness, left=left)
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=2)) == Complete()
    assert len(harness.analyzer.seen) == 1
    assert harness.blob_names() == []
    assert states(harness) == ["removed"]


def test_failing_sweep_keeps_cleanup_pending_and_does_not_abort_the_run(make_harness: Build) -> None:
    """A delete that fails (Azurite refuses to delete a leased blob) keeps that record cleanup_pending,
    is counted in errors, the other record is still swept, and the next run finishes it."""
    harness = make_harness()
    refs: list[str] = []
    for _ in range(2):
        receipt = harness.claimcheck.producer.submit(
            io.BytesIO(document(90_000)),
            tenant_id="tenant-a",
            purpose="bulk-ingest",
            classification="internal",
            content_type="text/plain",
        )
        assert receipt.payload_ref is not None
        refs.append(receipt.payload_ref)
        assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert states(harness) == ["cleanup_pending", "cleanup_pending"]
    stuck, other = refs
    lease = harness.container.get_blob_client(stuck).acquire_lease()
    report = harness.claimcheck.reconciler.run()
    assert report.errors == [stuck]
    assert report.cleaned_up == [other]
    assert harness.blob_names() == [stuck]
    by_ref = {row["PartitionKey"]: row["state"] for row in harness.rows(harness.settings.registry_table)}
    assert by_ref == {stuck: "cleanup_pending", other: "removed"}
    lease.break_lease(lease_break_period=0)
    retried = harness.claimcheck.reconciler.run()
    assert (retried.errors, retried.cleaned_up) == ([], [stuck])
    assert harness.blob_names() == []


class StaticDeadLetters:
    """Dead-letter counts as data (the adapter itself is tested against the emulator in
    tests/integration/servicebus/test_dead_letter_counts.py); ``None`` stands for a failing read."""

    def __init__(self, counts: list[DeadLetterCount] | None) -> None:
        self.counts = counts

    def dead_letter_counts(self) -> list[DeadLetterCount]:
        if self.counts is None:
            raise BrokerUnavailable("dead-letter counts: Service Bus did not answer (ServiceRequestError)")
        return self.counts


def test_dead_letter_counts_are_reported_with_an_alert_past_the_age(
    make_harness: Build, caplog: pytest.LogCaptureFixture
) -> None:
    """Counts and oldest age per entity reach the report and the summary line; an entity whose oldest
    dead letter is older than CLAIMCHECK_DEAD_LETTER_ALERT_AGE_SECONDS gets an ALERT line; a failing
    read is one counted error and the rest of the run goes on."""
    harness = make_harness(dead_letter_alert_age_seconds=600)
    now = harness.clock.now
    source = StaticDeadLetters(
        [
            DeadLetterCount("documents", 3, now - timedelta(seconds=900)),
            DeadLetterCount("results/audit", 1, now - timedelta(seconds=60)),
            DeadLetterCount("results/review", 0, None),
        ]
    )
    reconciler = ClaimCheck.from_settings(
        harness.settings,
        storage_connection=harness.connection,
        bus=harness.bus,
        clock=harness.clock,
        dead_letters=source,
    ).reconciler
    with caplog.at_level(logging.INFO, logger="claimcheck.reconciler"):
        report = reconciler.run(now)
    assert report.dead_letters == [
        {"entity": "documents", "count": 3, "oldest_age_seconds": 900},
        {"entity": "results/audit", "count": 1, "oldest_age_seconds": 60},
        {"entity": "results/review", "count": 0, "oldest_age_seconds": None},
    ]
    (alert,) = [a for a in report.alerts if "dead-lettered" in a]
    assert alert.startswith("documents: 3 dead-lettered message(s), the oldest 900 s old")
    lines = [record.getMessage() for record in caplog.records]
    (summary,) = [line for line in lines if line.startswith("reconciliation finished")]
    assert "dead_lettered=4 oldest_dead_letter_age_s=900" in summary
    assert f"ALERT {alert}" in lines
    source.counts = None
    receipt = harness.claimcheck.producer.submit(
        document(30_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    harness.container.delete_blob(receipt.payload_ref)
    failed = reconciler.run(now)
    assert failed.errors == ["dead-letter counts"]
    assert failed.flagged_missing == [receipt.payload_ref]  # the run went on
