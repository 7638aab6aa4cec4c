"""Registry, ledger and blob adapter guarantees against Azurite: ETags, write-once, expiry, big ints."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta

import pytest
from claimcheck.adapters.blobs import AzureBlobPayloadStore
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.errors import ConcurrencyConflict, EffectInProgress, IllegalTransition
from claimcheck.idempotency import AlreadyDone, Claimed, IdempotencyLedger
from claimcheck.registry import PayloadRegistry
from claimcheck.settings import ProvisionalTag
from claimcheck.states import PayloadState

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


def registry_of(harness: Harness) -> PayloadRegistry:
    return PayloadRegistry(AzureEntityTable(harness.tables.get_table_client(harness.settings.registry_table)))


def stored_record(harness: Harness) -> str:
    receipt = harness.claimcheck.producer.submit(
        document(40_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    return receipt.payload_ref


def test_illegal_move_raises_and_changes_nothing(make_harness: Build) -> None:
    """available → removed skips the effect: it raises IllegalTransition and the row is unchanged."""
    harness = make_harness()
    registry = registry_of(harness)
    record = registry.get(stored_record(harness))
    assert record is not None
    with pytest.raises(IllegalTransition):
        registry.move(record, PayloadState.REMOVED, now=harness.clock.now)
    assert registry.get(record.ref) == record


def test_lost_race_on_a_record_raises(make_harness: Build) -> None:
    """Two writers moving the same read of a record: the second one raises ConcurrencyConflict."""
    harness = make_harness()
    registry = registry_of(harness)
    record = registry.get(stored_record(harness))
    assert record is not None
    registry.move(record, PayloadState.PROCESSED, now=harness.clock.now)
    with pytest.raises(ConcurrencyConflict):
        registry.move(record, PayloadState.MISSING, now=harness.clock.now)


def test_ledger_expired_claim_is_taken_over_once(make_harness: Build) -> None:
    """A crashed attempt's claim blocks until it expires; then exactly one taker gets it."""
    harness = make_harness()
    ledger = IdempotencyLedger(
        AzureEntityTable(harness.tables.get_table_client(harness.settings.idempotency_table)),
        lease=timedelta(seconds=30),
    )
    now = harness.clock.now
    crashed = ledger.begin("k", now=now)
    assert isinstance(crashed, Claimed)
    with pytest.raises(EffectInProgress):
        ledger.begin("k", now=now + timedelta(seconds=10))
    taker = ledger.begin("k", now=now + timedelta(seconds=31))
    assert isinstance(taker, Claimed)
    with pytest.raises(ConcurrencyConflict):
        ledger.complete(crashed, {"late": True}, now=now)  # the crashed attempt lost its claim
    ledger.complete(taker, {"done": 1}, now=now)
    assert ledger.begin("k", now=now + timedelta(hours=1)) == AlreadyDone("k", {"done": 1})


def test_provisional_tag_comes_from_settings(make_harness: Build) -> None:
    """A configured provisional tag is what the store writes, finds and flips to active (Azurite)."""
    harness = make_harness()
    store = AzureBlobPayloadStore(harness.container, provisional_tag=ProvisionalTag("cc-publish", "pending"))
    ref = "ref_" + "t" * 27
    store.upload_provisional(ref, io.BytesIO(document(1_000)), content_type="text/plain", max_bytes=10**6)
    assert harness.container.get_blob_client(ref).get_blob_tags() == {"cc-publish": "pending"}
    assert [found.ref for found in store.provisional_objects()] == [ref]
    store.activate(ref)
    assert harness.container.get_blob_client(ref).get_blob_tags() == {"cc-publish": "active"}
    assert list(store.provisional_objects()) == []
