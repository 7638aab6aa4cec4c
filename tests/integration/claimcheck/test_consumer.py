"""Consumer pipeline against Azurite: verification, authorization, classification of failures."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from claimcheck import Complete, DeadLetter, DeadLetterReason, InboundMessage, OutboundMessage, Outcome, Retry
from claimcheck.analysis import ContractObligationExtractor
from claimcheck.refs import new_payload_ref
from claimcheck.testing import consume_and_settle
from claimcheck.workitems import IntakeReceipt

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


def submit(harness: Harness, payload: bytes, **changes: str) -> IntakeReceipt:
    values = {
        "tenant_id": "tenant-a",
        "purpose": "contract-review",
        "classification": "confidential",
        "content_type": "text/plain",
    }
    values.update(changes)
    return harness.claimcheck.producer.submit(payload, **values)  # type: ignore[arg-type]


def forged(harness: Harness, **changes: object) -> InboundMessage:
    """The last queued message with envelope fields replaced (as a hostile or buggy sender would: its
    session id and properties copied, so that only the envelope differs)."""
    original = harness.delivery()
    body = json.loads(original.body)
    body.update(changes)
    return InboundMessage(
        body=json.dumps(body).encode(),
        message_id="forged",
        delivery_count=1,
        session_id=original.session_id,
        correlation_id=None,
        application_properties=dict(original.application_properties),
        enqueued_time=None,
    )


def test_by_reference_payload_is_processed_and_cleaned_up(make_harness: Build) -> None:
    """The analyzer gets exactly the stored bytes; a result event is routed; sync cleanup leaves proof."""
    harness = make_harness()
    payload = document(300_000)
    receipt = submit(harness, payload)
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert harness.analyzer.seen == [payload]
    (event,) = harness.results()
    assert event.application_properties["tenant"] == "tenant-a"
    assert event.application_properties["document_type"] == "contract"
    assert harness.blob_names() == []
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["removed"]
    (proof,) = harness.rows(harness.settings.audit_table)
    assert (proof["PartitionKey"], proof["version"], proof["deleted_by"]) == (
        receipt.payload_ref,
        1,
        "claimcheck-consumer",
    )
    view = harness.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert (view.state, view.payload_state, view.receipt_versions) == ("completed", "removed", (1,))
    assert view.result is not None
    assert view.result["document_type"] == "contract"


def test_inline_payload_is_processed_with_the_default_analyzer(make_harness: Build) -> None:
    """An inline contract is verified and analyzed by the real extractor; routing follows the result."""
    harness = make_harness()
    harness.claimcheck.consumer._analyzer = ContractObligationExtractor()
    text = (
        b'SERVICES AGREEMENT between Acme Ltd (the "Supplier") and Beta GmbH (the "Customer").\n'
        b"1. The Supplier shall deliver the reports by 15 March 2026.\n"
    )
    submit(harness, text, classification="internal")
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    (event,) = harness.results()
    assert event.application_properties["document_type"] == "contract"
    assert json.loads(event.body)["summary"]["obligations"] >= 1


def test_tampered_object_is_dead_lettered_and_never_processed(make_harness: Build) -> None:
    """An object changed after upload dead-letters integrity_failed; metadata and object are kept."""
    harness = make_harness()
    receipt = submit(harness, document(100_000))
    assert receipt.payload_ref is not None
    harness.container.get_blob_client(receipt.payload_ref).upload_blob(
        document(100_000, marker="TAMPERED"), overwrite=True
    )
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.INTEGRITY_FAILED
    assert harness.analyzer.seen == []
    assert harness.results() == []
    (row,) = harness.rows(harness.settings.registry_table)
    assert (row["state"], row["content_length"]) == ("integrity_failed", 100_000)
    assert harness.blob_names() == [receipt.payload_ref]
    view = harness.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert (view.state, view.failure_reason) == ("failed", "integrity_failed")


def test_another_tenants_reference_looks_like_an_unknown_one(make_harness: Build) -> None:
    """Tenant B presenting tenant A's reference gets the same answer as a reference that never existed."""
    harness = make_harness()
    submit(harness, document(50_000), work_item_id="wi-shared")
    other_tenant = consume_and_settle(harness.claimcheck.consumer, forged(harness, tenant_id="tenant-b"))
    unknown = consume_and_settle(harness.claimcheck.consumer, forged(harness, payload_ref=new_payload_ref()))
    assert isinstance(other_tenant, DeadLetter)
    assert other_tenant == unknown
    assert other_tenant.reason is DeadLetterReason.ACCESS_DENIED
    assert harness.analyzer.seen == []
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["available"]


def test_expired_envelope_is_dead_lettered_and_the_object_kept(make_harness: Build) -> None:
    """Past expires_at the read grant is over: dead-letter expired, nothing deleted, work item expired."""
    harness = make_harness()
    receipt = submit(harness, document(50_000))
    harness.clock.advance(timedelta(days=2))
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.EXPIRED
    assert harness.blob_names() == [receipt.payload_ref]
    view = harness.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert view.state == "expired"


def test_invalid_and_unsupported_envelopes_are_dead_lettered_with_the_field(make_harness: Build) -> None:
    """A malformed body names its field; a future major version is unsupported_schema_version."""
    harness = make_harness()
    submit(harness, document(50_000))
    bad_length = consume_and_settle(harness.claimcheck.consumer, forged(harness, content_length=-1))
    future = consume_and_settle(harness.claimcheck.consumer, forged(harness, schema_version="2.0"))
    assert isinstance(bad_length, DeadLetter)
    assert bad_length.reason is DeadLetterReason.INVALID_ENVELOPE
    assert "content_length" in bad_length.description
    assert isinstance(future, DeadLetter)
    assert future.reason is DeadLetterReason.UNSUPPORTED_SCHEMA_VERSION


def test_missing_object_is_classified_not_blindly_retried(make_harness: Build) -> None:
    """A registered object that vanished dead-letters payload_missing and the record is flagged missing."""
    harness = make_harness()
    receipt = submit(harness, document(50_000))
    assert receipt.payload_ref is not None
    harness.container.delete_blob(receipt.payload_ref)
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PAYLOAD_MISSING
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["missing"]


def test_message_ahead_of_activation_is_retried_then_given_up(make_harness: Build) -> None:
    """A delivery that beats the producer's activation retries with backoff, and gives up after grace."""
    harness = make_harness()
    deliveries: list[object] = []

    class DeliverDuringPublish:
        def publish(self, destination: str, message: object) -> None:
            harness.bus.publish(destination, message)  # type: ignore[arg-type]
            if destination == harness.settings.documents_queue:
                deliveries.append(consume_and_settle(harness.claimcheck.consumer, harness.delivery()))

    harness.claimcheck.producer._bus = DeliverDuringPublish()
    submit(harness, document(50_000))
    (early,) = deliveries
    assert isinstance(early, Retry)
    assert early.delay > timedelta(0)
    assert len(harness.sleeps) == harness.settings.visibility_polls - 1  # polled in-process first
    assert harness.analyzer.seen == []
    late = consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=5))
    assert late == Complete()  # by now the producer confirmed: processed normally


def test_version_still_unconfirmed_after_the_grace_is_payload_missing(make_harness: Build) -> None:
    """Past the visibility grace, a version the producer never confirmed dead-letters payload_missing."""
    harness = make_harness()
    deliveries: list[object] = []

    class DeliverAfterTheGrace:
        def publish(self, destination: str, message: object) -> None:
            harness.bus.publish(destination, message)  # type: ignore[arg-type]
            if destination == harness.settings.documents_queue:
                harness.clock.advance(timedelta(seconds=harness.settings.visibility_grace_seconds + 1))
                deliveries.append(consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1)))

    harness.claimcheck.producer._bus = DeliverAfterTheGrace()
    submit(harness, document(50_000))
    (outcome,) = deliveries
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PAYLOAD_MISSING
    assert "not confirmed" in outcome.description
    assert harness.analyzer.seen == []


def test_a_short_broker_outage_is_ridden_out_on_the_same_delivery(
    make_harness: Build, caplog: pytest.LogCaptureFixture
) -> None:
    """Publishing the result fails a few times (broker unreachable): the consumer backs off in-process
    and completes on this delivery, instead of spending deliveries on an outage of seconds; it logs
    the outage once when it starts and once when it ends."""
    harness = make_harness()
    submit(harness, document(50_000))
    harness.bus.fail_next = 3
    with caplog.at_level(logging.INFO, logger="claimcheck.consumer"):
        assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1)) == Complete()
    assert len(harness.sleeps) == 3
    assert harness.sleeps[0] < harness.sleeps[2]  # backing off
    assert len(harness.results()) == 1
    outage_lines = [r.getMessage() for r in caplog.records if "storage or Service Bus" in r.getMessage()]
    assert outage_lines == [
        "the consumer's storage or Service Bus is down (PublishFailed); retrying with backoff",
        "the consumer's storage or Service Bus is back up after 3 failed attempt(s)",
    ]


def test_unexpected_failures_are_retried_a_bounded_number_of_times(make_harness: Build) -> None:
    """A result publish failing past the outage wait retries (object kept) and dead-letters on the
    last allowed delivery."""
    harness = make_harness(outage_wait_seconds=2)
    submit(harness, document(50_000))
    harness.bus.fail_next = 10**6
    retry = consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1))
    assert isinstance(retry, Retry)
    assert sum(harness.sleeps) == pytest.approx(2)  # waited the outage budget, then gave the delivery up
    assert len(harness.blob_names()) == 1  # no deletion before the effect is confirmed
    last = consume_and_settle(
        harness.claimcheck.consumer, harness.delivery(count=harness.settings.max_delivery_count)
    )
    harness.bus.fail_next = 0
    assert isinstance(last, DeadLetter)
    assert last.reason is DeadLetterReason.PROCESSING_FAILED
    assert len(harness.blob_names()) == 1  # no deletion after a dead-letter either
    view = harness.claimcheck.status.get(harness.queued()[0].session_id or "")
    assert view is not None
    assert (view.state, view.failure_reason) == ("failed", "processing_failed")
    # An operator replays the dead-lettered message: it runs again and completes once.
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1)) == Complete()
    assert harness.blob_names() == []
    assert len(harness.results()) == 1


def test_forged_envelope_does_not_poison_the_real_work_item(make_harness: Build) -> None:
    """A same-tenant envelope with an unknown ref is dead-lettered without touching the work item."""
    harness = make_harness()
    receipt = submit(harness, document(50_000))
    forged_outcome = consume_and_settle(
        harness.claimcheck.consumer, forged(harness, payload_ref=new_payload_ref())
    )
    assert isinstance(forged_outcome, DeadLetter)
    view = harness.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert view.state == "accepted"
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()


def test_version_never_confirmed_gives_up_as_payload_missing(make_harness: Build) -> None:
    """A message for a version the producer never confirmed retries within grace, then payload_missing."""
    harness = make_harness()
    submit(harness, b"short inline text", classification="public", work_item_id="wi-unconfirmed")
    ahead = forged(harness, payload_version=2)
    assert isinstance(consume_and_settle(harness.claimcheck.consumer, ahead), Retry)
    harness.clock.advance(timedelta(seconds=harness.settings.visibility_grace_seconds + 1))
    outcome = consume_and_settle(harness.claimcheck.consumer, ahead)
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PAYLOAD_MISSING


def test_message_ahead_of_activation_is_processed_after_in_process_polling(make_harness: Build) -> None:
    """A consumer that receives the message before the producer confirmed waits briefly and processes it.

    The race is forced, not hoped for: the producer's publish returns (and the producer goes on to
    confirm the version) only once the racing consumer has found the version not yet visible and
    started its first in-process poll; the poll count proves the consumer waited."""
    harness = make_harness(visibility_polls=10)
    polls: list[float] = []
    first_poll = threading.Event()

    def poll_sleep(seconds: float) -> None:
        polls.append(seconds)
        first_poll.set()
        time.sleep(seconds)

    racing = harness.another_consumer(harness.analyzer, sleep=poll_sleep)
    outcomes: list[Outcome] = []

    class DeliverInParallel:
        def publish(self, destination: str, message: OutboundMessage) -> None:
            harness.bus.publish(destination, message)
            if destination == harness.settings.documents_queue:
                worker = threading.Thread(
                    target=lambda: outcomes.append(consume_and_settle(racing.consumer, harness.delivery()))
                )
                worker.start()
                workers.append(worker)
                first_poll.wait(timeout=60)  # hold the producer's confirmation until the consumer polled

    workers: list[threading.Thread] = []
    harness.claimcheck.producer._bus = DeliverInParallel()
    submit(harness, document(50_000))
    workers[0].join(timeout=60)
    assert first_poll.is_set(), "the consumer never saw the version unconfirmed: no race was tested"
    assert 1 <= len(polls) < harness.settings.visibility_polls
    assert outcomes == [Complete()]
    assert len(harness.results()) == 1


def test_unreadable_document_is_dead_lettered_at_once(make_harness: Build) -> None:
    """A verified document the analyzer cannot read dead-letters processing_failed on the first delivery."""
    harness = make_harness()
    harness.claimcheck.consumer._analyzer = ContractObligationExtractor()
    receipt = submit(harness, b"%PDF-1.7\n" + document(30_000), content_type="application/pdf")
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1))
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PROCESSING_FAILED
    assert harness.blob_names() == [receipt.payload_ref]  # kept: nothing is deleted on dead-letter
    assert harness.results() == []
