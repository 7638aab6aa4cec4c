"""Exactly one effect per work item version: redeliveries, concurrent consumers, replaced versions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import BinaryIO

import pytest
from claimcheck import Complete, DeadLetter, DeadLetterReason, Outcome, Retry
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.analysis import AnalysisResult, Obligation
from claimcheck.envelope import parse_envelope
from claimcheck.errors import EffectInProgress
from claimcheck.idempotency import Claimed, ClaimHeartbeat, IdempotencyLedger, result_effect_key
from claimcheck.results import read_result
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, RecordingAnalyzer, document

Build = Callable[..., Harness]


def submit(harness: Harness, payload: bytes, **changes: str) -> str:
    values = {
        "tenant_id": "tenant-a",
        "purpose": "contract-review",
        "classification": "confidential",
        "content_type": "text/plain",
    }
    values.update(changes)
    return harness.claimcheck.producer.submit(payload, **values).work_item_id  # type: ignore[arg-type]


def test_two_deliveries_of_one_message_make_one_effect(make_harness: Build) -> None:
    """A redelivered message completes without a second analysis, result row or result event."""
    harness = make_harness(claim_lease_seconds=60)
    submit(harness, document(80_000), purpose="evidence-archive")  # retained: the object stays readable
    first = consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1))
    second = consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=2))
    assert first == second == Complete()
    assert len(harness.analyzer.seen) == 1
    assert len(harness.results()) == 1
    assert len(harness.rows(harness.settings.results_table)) == 1


def test_redelivery_after_sync_cleanup_still_completes(make_harness: Build) -> None:
    """Once the object is cleaned up, a late duplicate completes instead of dead-lettering missing."""
    harness = make_harness()
    submit(harness, document(80_000))
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert harness.blob_names() == []
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=2)) == Complete()
    assert len(harness.results()) == 1


def test_two_consumers_at_once_make_one_effect(make_harness: Build) -> None:
    """Two consumers racing on one work item: one effect; the loser retries and later completes idly."""
    harness = make_harness(claim_wait_seconds=4)
    submit(harness, document(120_000))
    first_is_analyzing, rival_finished = threading.Event(), threading.Event()

    def hold_until_the_rival_tried() -> None:
        first_is_analyzing.set()
        rival_finished.wait(timeout=60)

    first_analyzer = RecordingAnalyzer(before=hold_until_the_rival_tried)
    second_analyzer = RecordingAnalyzer()
    harness.claimcheck.consumer._analyzer = first_analyzer
    rival = harness.another_consumer(second_analyzer)
    message = harness.delivery()

    def rival_handles() -> Outcome:
        first_is_analyzing.wait(timeout=60)
        try:
            return consume_and_settle(rival.consumer, message)
        finally:
            rival_finished.set()

    with ThreadPoolExecutor(max_workers=2) as pool:
        first_future = pool.submit(consume_and_settle, harness.claimcheck.consumer, message)
        rival_outcome = pool.submit(rival_handles).result(timeout=60)
        first_outcome = first_future.result(timeout=60)
    assert first_outcome == Complete()
    assert isinstance(rival_outcome, Retry)  # it waited out its claim budget in-process first
    assert sum(harness.sleeps) == pytest.approx(4)
    assert second_analyzer.seen == []
    assert consume_and_settle(rival.consumer, harness.delivery(count=2)) == Complete()
    assert len(harness.results()) == 1
    assert len(harness.rows(harness.settings.results_table)) == 1


def test_replaced_version_never_feeds_new_bytes_to_the_old_envelope(make_harness: Build) -> None:
    """v2 submitted while v1 is processed: v1 sees only v1 bytes; a late v1 redelivery is superseded."""
    harness = make_harness()
    old, new = document(60_000, marker="VERSION-ONE"), document(70_000, marker="VERSION-TWO")
    work_item = submit(harness, old, work_item_id="wi-replaced")
    v1 = harness.delivery()

    def replace_version() -> None:
        if len(harness.analyzer.seen) == 0:
            submit(harness, new, work_item_id=work_item)

    harness.analyzer.before = replace_version
    assert consume_and_settle(harness.claimcheck.consumer, v1) == Complete()
    assert harness.analyzer.seen == [old]
    v2 = harness.delivery()
    assert consume_and_settle(harness.claimcheck.consumer, v2) == Complete()
    assert harness.analyzer.seen == [old, new]
    late_v1 = consume_and_settle(harness.claimcheck.consumer, harness.delivery(0, count=2))
    assert late_v1 == Complete()  # v1's effect exists: a duplicate, not a second effect
    view = harness.claimcheck.status.get(work_item)
    assert view is not None
    assert (view.version, view.state) == (2, "completed")


def test_unprocessed_old_version_is_dead_lettered_as_superseded(make_harness: Build) -> None:
    """A v1 message first delivered after v2 was accepted is dead-lettered version_mismatch."""
    harness = make_harness()
    work_item = submit(harness, document(60_000), work_item_id="wi-superseded")
    submit(harness, document(61_000), work_item_id=work_item)
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery(0))
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.VERSION_MISMATCH
    assert harness.analyzer.seen == []


def test_a_large_result_is_stored_whole(make_harness: Build) -> None:
    """A result larger than one table property (200 long obligations) is stored split and reads back whole."""
    harness = make_harness()
    obligations = tuple(
        Obligation(party="Supplier", text=f"{index:03d} " + "shall deliver " * 21, due_date=None, page=1)
        for index in range(200)
    )
    big = AnalysisResult(
        document_type="contract",
        parties=("Supplier",),
        dates=(),
        obligations=obligations,
        page_count=1,
        review_required=True,
        priority="high",
    )

    class BigAnalyzer:
        def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
            return big

    harness.claimcheck.consumer._analyzer = BigAnalyzer()
    submit(harness, document(20_000))
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    (row,) = harness.rows(harness.settings.results_table)
    assert row["result_parts"] > 1
    assert read_result(row) == big.to_dict()


def _ledger(harness: Harness) -> IdempotencyLedger:
    return IdempotencyLedger(
        AzureEntityTable(harness.tables.get_table_client(harness.settings.idempotency_table)),
        lease=timedelta(seconds=harness.settings.claim_lease_seconds),
    )


def test_a_crashed_attempts_claim_is_waited_out_without_spending_a_delivery(make_harness: Build) -> None:
    """The redelivery after a crash finds the dead attempt's claim: it waits for the lease to end
    (in-process, the clock advanced by its sleeps) and completes on that same delivery, once."""
    harness = make_harness(claim_lease_seconds=30)
    submit(harness, document(50_000))
    envelope = parse_envelope(harness.delivery().body)
    key = result_effect_key(envelope.work_item_id, envelope.payload_version, envelope.purpose)
    crashed = _ledger(harness).begin(key, now=harness.clock.now)  # claimed, then the host died
    assert isinstance(crashed, Claimed)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        harness.clock.advance(timedelta(seconds=seconds))

    harness.claimcheck.consumer._sleep = sleep
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=2)) == Complete()
    assert 30 <= sum(slept) < 33  # one lease, polled, not the 300 s of a fixed expiry
    assert len(harness.analyzer.seen) == 1
    assert len(harness.results()) == 1


def test_a_live_attempts_heartbeat_keeps_its_claim(make_harness: Build) -> None:
    """A renewed claim outlives its first lease: a rival asking after that still finds it held."""
    harness = make_harness(claim_lease_seconds=30)
    ledger = _ledger(harness)
    claim = ledger.begin("k", now=harness.clock.now)
    assert isinstance(claim, Claimed)
    heartbeat = ClaimHeartbeat(ledger, claim, clock=harness.clock, interval=timedelta(milliseconds=50))
    heartbeat.start()
    harness.clock.advance(timedelta(seconds=25))
    deadline = time.monotonic() + 30
    while heartbeat.renewals < 1:
        assert time.monotonic() < deadline, "the heartbeat never renewed the claim"
        time.sleep(0.05)
    renewed = heartbeat.stop()
    with pytest.raises(EffectInProgress) as held:
        ledger.begin("k", now=harness.clock.now + timedelta(seconds=10))  # past the first lease
    assert held.value.holder_expires_at == harness.clock.now + timedelta(seconds=30)
    ledger.complete(renewed, {"done": 1}, now=harness.clock.now)  # the last ETag is the one that counts
