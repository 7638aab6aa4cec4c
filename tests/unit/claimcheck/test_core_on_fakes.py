"""The producer, consumer, idempotency ledger and reconciler on ``claimcheck.testing``'s fakes.

Fast feedback for ``make check``: the same wiring as production (``ClaimCheck.build``), in memory.
The guarantees themselves are proven again against Azurite in tests/integration/claimcheck/; the
fakes keep to the ports' contract (tests/contract/).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import pytest
from claimcheck import ClaimCheck, Complete, DeadLetter, DeadLetterReason, InboundMessage, Settings
from claimcheck.analysis import AnalysisResult, Analyzer, ContractObligationExtractor
from claimcheck.errors import (
    ConcurrencyConflict,
    EffectInProgress,
    ForbiddenContentType,
    PayloadTooLarge,
    PublishNotConfirmed,
)
from claimcheck.idempotency import AlreadyDone, Claimed, IdempotencyLedger
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.storage import Key, Tables
from claimcheck.testing import (
    InMemoryBus,
    InMemoryPayloadStore,
    InMemoryTable,
    consume_and_settle,
    in_memory_tables,
)
from claimcheck.workitems import IntakeReceipt

CONTRACT = b"The Supplier shall deliver the goods within 30 days. The Customer shall pay the invoice.\n"


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 12, 1, 8, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@dataclass
class World:
    claimcheck: ClaimCheck
    settings: Settings
    store: InMemoryPayloadStore
    tables: Tables
    bus: InMemoryBus
    clock: Clock
    sleeps: list[float]

    def submit(self, payload: bytes, **changes: Any) -> IntakeReceipt:
        values: dict[str, Any] = {
            "tenant_id": "tenant-a",
            "purpose": "contract-review",
            "classification": "confidential",
            "content_type": "text/plain",
        }
        values.update(changes)
        return self.claimcheck.producer.submit(payload, **values)

    def delivery(self, index: int = -1, **envelope_changes: Any) -> InboundMessage:
        delivered = self.bus.deliveries(self.settings.documents_queue)[index]
        if not envelope_changes:
            return delivered
        body = json.dumps({**json.loads(delivered.body), **envelope_changes}).encode()
        return replace(delivered, body=body)

    def registry_states(self) -> list[str]:
        registry = self.tables.registry
        assert isinstance(registry, InMemoryTable)
        return [row.values["state"] for row in registry.rows()]


def make_world(analyzer: Analyzer | None = None, **settings_changes: Any) -> World:
    settings = replace(Settings(environment="test"), inline_threshold_bytes=1024, **settings_changes)
    clock, sleeps = Clock(), list[float]()
    store = InMemoryPayloadStore(chunk_bytes=4096, provisional_tag=settings.provisional_tag, clock=clock)
    tables, bus = in_memory_tables(), InMemoryBus()
    claimcheck = ClaimCheck.build(
        settings, store=store, tables=tables, bus=bus, clock=clock, sleep=sleeps.append, analyzer=analyzer
    )
    return World(claimcheck, settings, store, tables, bus, clock, sleeps)


def long_contract(size: int = 50_000) -> bytes:
    return (CONTRACT * (size // len(CONTRACT) + 1))[:size]


# --- producer ----------------------------------------------------------------------------------------


def test_small_public_payload_travels_inline_and_stores_nothing() -> None:
    world = make_world()
    receipt = world.submit(CONTRACT, classification="internal")
    assert (receipt.transport, receipt.payload_ref, receipt.version) == ("inline", None, 1)
    assert world.store.refs() == []
    (message,) = world.bus.messages(world.settings.documents_queue)
    assert json.loads(message.body).get("payload_ref") is None


# Over one chunk, so its type is checked as it uploads, after the version was reserved: text sent as a PDF.
TEXT_AS_PDF = {"content_type": "application/pdf"}


def test_a_new_version_refused_while_streaming_gives_its_version_back() -> None:
    """The corrected write (same If-Match) is accepted at once as that version, and the status never
    names the refused one as being written (it was never accepted)."""
    world = make_world()
    first = world.submit(long_contract())
    with pytest.raises(ForbiddenContentType):
        world.submit(
            long_contract(DEFAULT_CHUNK_BYTES + 1024),
            work_item_id=first.work_item_id,
            if_match=1,
            **TEXT_AS_PDF,
        )
    view = world.claimcheck.status.get(first.work_item_id, min_version=2)
    assert view is not None
    assert (view.visibility, view.version) == ("unknown_version", 1)  # 2 was never accepted
    corrected = world.submit(long_contract(), work_item_id=first.work_item_id, if_match=1)
    assert corrected.version == 2
    assert len(world.bus.messages(world.settings.documents_queue)) == 2


def test_a_callers_new_work_item_refused_while_streaming_leaves_no_row() -> None:
    """A caller's own id whose first write is refused as it uploads: the retry is that id's version 1."""
    world = make_world()
    with pytest.raises(ForbiddenContentType):
        world.submit(long_contract(DEFAULT_CHUNK_BYTES + 1024), work_item_id="wi-refused-once", **TEXT_AS_PDF)
    assert world.claimcheck.status.get("wi-refused-once") is None
    corrected = world.submit(long_contract(), work_item_id="wi-refused-once")
    assert corrected.version == 1


def test_sensitive_payload_goes_by_reference_and_is_activated_after_the_publish() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    assert receipt.transport == "reference"
    assert world.store.refs() == [receipt.payload_ref]
    assert world.store.tag_of(str(receipt.payload_ref)) == "active"
    assert world.registry_states() == ["available"]
    view = world.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert (view.version, view.state) == (1, "accepted")


def test_lost_publish_leaves_a_provisional_object_that_reconciliation_removes() -> None:
    world = make_world()
    world.bus.fail_next = 1
    with pytest.raises(PublishNotConfirmed):
        world.submit(long_contract())
    (ref,) = world.store.refs()
    assert world.store.tag_of(ref) == world.settings.provisional_tag.value
    assert world.registry_states() == ["preparing"]
    assert world.claimcheck.reconciler.run().orphans_removed == []  # inside the grace period
    world.clock.advance(timedelta(seconds=world.settings.orphan_grace_seconds + 1))
    report = world.claimcheck.reconciler.run()
    assert report.orphans_removed == [ref]
    assert world.store.refs() == []


def test_over_the_limit_is_refused_and_nothing_is_kept() -> None:
    world = make_world(max_payload_bytes=10_000)
    with pytest.raises(PayloadTooLarge):
        world.submit(long_contract(20_000))
    assert world.store.refs() == []
    assert world.bus.messages(world.settings.documents_queue) == []


# --- consumer ----------------------------------------------------------------------------------------


def test_a_delivery_is_processed_once_and_its_duplicate_has_no_second_effect() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    assert consume_and_settle(world.claimcheck.consumer, world.delivery()) == Complete()
    assert len(world.bus.messages(world.settings.results_topic)) == 1
    assert consume_and_settle(world.claimcheck.consumer, world.delivery()) == Complete()  # a redelivery
    assert len(world.bus.messages(world.settings.results_topic)) == 1
    view = world.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert view.state == "completed"
    assert world.store.refs() == []  # contract-review cleans up synchronously
    assert world.registry_states() == ["removed"]


def test_the_sync_cleanup_waits_for_the_settlement_step() -> None:
    """handle() answers Complete with the object still stored; only its after-settlement step (run by
    whoever completed the message) deletes it."""
    world = make_world()
    world.submit(long_contract())
    outcome = world.claimcheck.consumer.handle(world.delivery())
    assert outcome == Complete()
    assert len(world.store.refs()) == 1
    assert world.registry_states() == ["processed"]  # cleanup_pending only once the message is completed
    assert isinstance(outcome, Complete)
    outcome.after_settlement()
    assert world.store.refs() == []
    assert world.registry_states() == ["removed"]


def test_a_replaced_object_is_dead_lettered_as_integrity_failed_and_kept() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    world.store.tamper(str(receipt.payload_ref), long_contract().replace(b"Supplier", b"Supp1ier"))
    outcome = consume_and_settle(world.claimcheck.consumer, world.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.INTEGRITY_FAILED
    assert world.registry_states() == ["integrity_failed"]
    assert world.store.refs() == [receipt.payload_ref]  # kept for investigation


@dataclass
class HeadAnalyzer:
    """Declares that it reads the first 100 bytes; records what it was handed."""

    reads_leading_bytes: int = 100
    seen: list[bytes] = field(default_factory=list)

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        self.seen.append(document.read())
        return ContractObligationExtractor().analyze(io.BytesIO(self.seen[-1]), content_type)


def test_a_head_reading_analyzer_gets_the_verified_head_by_reference_and_inline() -> None:
    analyzer = HeadAnalyzer()
    world = make_world(analyzer=analyzer)
    world.submit(long_contract())
    world.submit(CONTRACT * 3, classification="internal")  # inline
    for index in (0, 1):
        assert consume_and_settle(world.claimcheck.consumer, world.delivery(index)) == Complete()
    assert analyzer.seen == [long_contract()[:100], (CONTRACT * 3)[:100]]


def test_a_head_reading_analyzer_never_sees_an_object_corrupted_past_its_head() -> None:
    """Same ETag, same head, another tail: the sha256 over the whole object refuses it as before."""
    analyzer = HeadAnalyzer()
    world = make_world(analyzer=analyzer)
    receipt = world.submit(long_contract())
    world.store.corrupt(str(receipt.payload_ref), long_contract()[:-1] + b"!")
    outcome = consume_and_settle(world.claimcheck.consumer, world.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.INTEGRITY_FAILED
    assert analyzer.seen == []
    assert world.registry_states() == ["integrity_failed"]


def test_a_misdeclared_read_bound_is_refused_when_the_consumer_is_built() -> None:
    with pytest.raises(ValueError, match="reads_leading_bytes"):
        make_world(analyzer=HeadAnalyzer(reads_leading_bytes=0))


def test_an_object_removed_early_is_dead_lettered_as_missing() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    world.store.delete(str(receipt.payload_ref))
    outcome = consume_and_settle(world.claimcheck.consumer, world.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PAYLOAD_MISSING
    assert world.registry_states() == ["missing"]


def test_an_envelope_naming_another_tenant_is_denied_without_touching_the_work_item() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    outcome = consume_and_settle(world.claimcheck.consumer, world.delivery(tenant_id="tenant-b"))
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    view = world.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert view.state == "accepted"
    assert world.bus.messages(world.settings.results_topic) == []


# --- idempotency ledger --------------------------------------------------------------------------------


def test_ledger_expired_claim_is_taken_over_once() -> None:
    ledger = IdempotencyLedger(InMemoryTable(), lease=timedelta(seconds=30))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    crashed = ledger.begin("k", now=now)
    assert isinstance(crashed, Claimed)
    with pytest.raises(EffectInProgress):
        ledger.begin("k", now=now + timedelta(seconds=10))
    taker = ledger.begin("k", now=now + timedelta(seconds=31))
    assert isinstance(taker, Claimed)
    with pytest.raises(ConcurrencyConflict):
        ledger.complete(crashed, {"late": True}, now=now)
    ledger.complete(taker, {"done": 1}, now=now)
    assert ledger.begin("k", now=now + timedelta(hours=1)) == AlreadyDone("k", {"done": 1})
    assert ledger.lookup("k") == AlreadyDone("k", {"done": 1})


def test_ledger_release_lets_the_next_attempt_claim_at_once() -> None:
    table = InMemoryTable()
    ledger = IdempotencyLedger(table, lease=timedelta(minutes=5))
    now = datetime(2026, 12, 1, tzinfo=UTC)
    claim = ledger.begin("k", now=now)
    assert isinstance(claim, Claimed)
    ledger.release(claim)
    assert table.get(Key("k", "effect")) is None
    assert isinstance(ledger.begin("k", now=now), Claimed)


# --- reconciler ----------------------------------------------------------------------------------------


def test_reconciler_flags_an_available_object_that_disappeared() -> None:
    world = make_world()
    receipt = world.submit(long_contract())
    world.store.delete(str(receipt.payload_ref))
    report = world.claimcheck.reconciler.run()
    assert report.flagged_missing == [receipt.payload_ref]
    assert world.registry_states() == ["missing"]


def test_reconciler_sweeps_cleanup_pending_objects() -> None:
    world = make_world()
    receipt = world.submit(long_contract(), purpose="bulk-ingest", classification="internal")
    assert consume_and_settle(world.claimcheck.consumer, world.delivery()) == Complete()
    assert world.registry_states() == ["cleanup_pending"]
    report = world.claimcheck.reconciler.run()
    assert report.cleaned_up == [receipt.payload_ref]
    assert world.store.refs() == []
    audit = world.tables.audit
    assert isinstance(audit, InMemoryTable)
    (proof,) = audit.rows()
    assert (proof.key.partition, proof.values["deleted_by"]) == (receipt.payload_ref, "claimcheck-consumer")
