"""Idempotent and conditional intake and the status answers of docs/architecture.md §8, on Azurite tables."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.errors import (
    ConflictDetected,
    IdempotencyKeyReused,
    PreconditionRequired,
    PublishNotConfirmed,
)
from claimcheck.intake_keys import fingerprint, intake_key_id
from claimcheck.registry import PayloadRegistry
from claimcheck.status_cache import CachingWorkItemReader
from claimcheck.workitems import IntakeReceipt, WorkItemStatus, WorkItemStore

from .conftest import Harness, document

Build = Callable[..., Harness]
FIELDS: dict[str, Any] = {
    "tenant_id": "tenant-a",
    "purpose": "contract-review",
    "classification": "internal",
}


def keyed(harness: Harness, body: bytes, key: str, **extra: Any) -> tuple[IntakeReceipt, bool]:
    fields = {**FIELDS, **extra}

    def write() -> IntakeReceipt:
        return harness.claimcheck.producer.submit(body, content_type="text/plain", **fields)

    return harness.claimcheck.intake_keys.once(
        intake_key_id("caller-1", FIELDS["tenant_id"], key), fingerprint(body, fields, "text/plain"), write
    )


def test_same_key_same_content_answers_the_first_receipt_without_a_second_write(make_harness: Build) -> None:
    harness = make_harness()
    body = document(50_000)
    first, replayed_first = keyed(harness, body, "k-1")
    again, replayed_again = keyed(harness, body, "k-1")
    assert (replayed_first, replayed_again) == (False, True)
    assert again.to_dict() == first.to_dict()  # what the API answers: the same receipt
    assert len(harness.queued()) == 1
    assert len(harness.blob_names()) == 1


def test_same_key_other_content_is_refused_and_writes_nothing(make_harness: Build) -> None:
    harness = make_harness()
    keyed(harness, document(50_000), "k-2")
    with pytest.raises(IdempotencyKeyReused):
        keyed(harness, document(50_001), "k-2")
    with pytest.raises(IdempotencyKeyReused):
        keyed(harness, document(50_000), "k-2", classification="confidential")
    assert len(harness.queued()) == 1


def test_a_failed_write_frees_its_key_and_an_expired_key_writes_again(make_harness: Build) -> None:
    harness = make_harness(idempotency_window_seconds=60)
    body = document(50_000)

    def unconfirmed() -> IntakeReceipt:
        raise PublishNotConfirmed("simulated: the queue did not confirm")

    key_id = intake_key_id("caller-1", FIELDS["tenant_id"], "k-3")
    with pytest.raises(PublishNotConfirmed):
        harness.claimcheck.intake_keys.once(key_id, fingerprint(body, FIELDS, "text/plain"), unconfirmed)
    first, replayed = keyed(harness, body, "k-3")
    assert not replayed
    harness.clock.advance(timedelta(seconds=61))
    later, replayed_later = keyed(harness, body, "k-3")
    assert not replayed_later
    assert later.work_item_id != first.work_item_id


def test_keys_are_scoped_to_the_caller(make_harness: Build) -> None:
    harness = make_harness()
    body = document(50_000)
    keyed(harness, body, "k-4")
    other = harness.claimcheck.intake_keys.once(
        intake_key_id("caller-2", FIELDS["tenant_id"], "k-4"),
        fingerprint(body, FIELDS, "text/plain"),
        lambda: harness.claimcheck.producer.submit(body, content_type="text/plain", **FIELDS),
    )
    assert other[1] is False
    assert len(harness.queued()) == 2


def test_a_new_version_needs_the_current_version_in_if_match(make_harness: Build) -> None:
    harness = make_harness()
    producer, status = harness.claimcheck.producer, harness.claimcheck.status
    values: dict[str, Any] = {**FIELDS, "content_type": "text/plain", "work_item_id": "wi-cond"}
    assert producer.submit(document(50_000), **values, require_if_match=True).version == 1
    with pytest.raises(PreconditionRequired):
        producer.submit(document(50_001), **values, require_if_match=True)
    with pytest.raises(ConflictDetected) as stale:
        producer.submit(document(50_001), **values, if_match=0, require_if_match=True)
    assert stale.value.current_version == 1
    assert producer.submit(document(50_001), **values, if_match=1, require_if_match=True).version == 2
    with pytest.raises(ConflictDetected):
        producer.submit(document(50_002), **values, if_match=1, require_if_match=True)
    assert len(harness.queued()) == 2
    view = status.get("wi-cond", min_version=1)
    assert view is not None
    assert view.answer is not None
    assert (view.answer.visibility, view.answer.next_action) == ("conflict_detected", "re_read")


def test_status_answers_unknown_awaiting_and_exceeded_versions(make_harness: Build) -> None:
    harness = make_harness(visibility_window_seconds=30)
    producer, status = harness.claimcheck.producer, harness.claimcheck.status
    values: dict[str, Any] = {**FIELDS, "content_type": "text/plain", "work_item_id": "wi-late"}
    producer.submit(document(50_000), **values)
    harness.bus.fail_next = 1  # version 2 is reserved, its publish never confirmed
    with pytest.raises(PublishNotConfirmed):
        producer.submit(document(50_001), **values)
    answers = []
    for version in (3, 2):
        view = status.get("wi-late", min_version=version)
        assert view is not None
        assert view.answer is not None
        answers.append((view.answer.visibility, view.answer.next_action))
    harness.clock.advance(timedelta(seconds=31))
    view = status.get("wi-late", min_version=2)
    assert view is not None
    assert view.answer is not None
    answers.append((view.answer.visibility, view.answer.next_action))
    assert answers == [
        ("unknown_version", "stop"),
        ("awaiting_visibility", "wait"),
        ("propagation_exceeded", "reconcile"),
    ]


def test_propagation_exceeded_raises_one_entry_that_the_reconciler_reports_then_resolves(
    make_harness: Build,
) -> None:
    """docs/architecture.md §8: the first read past the deadline records a reconciliation entry (later
    reads add none); the reconciler counts it while the version is not visible and resolves it once
    it is."""
    harness = make_harness(visibility_window_seconds=30)
    producer, status = harness.claimcheck.producer, harness.claimcheck.status
    values: dict[str, Any] = {**FIELDS, "content_type": "text/plain", "work_item_id": "wi-entry"}
    producer.submit(document(50_000), **values)
    harness.bus.fail_next = 1  # version 2 is reserved, its publish never confirmed
    with pytest.raises(PublishNotConfirmed):
        producer.submit(document(50_001), **values)

    def entries() -> list[dict[str, Any]]:
        rows = harness.rows(harness.settings.work_items_table)
        return [row for row in rows if row["RowKey"] != "workitem"]

    assert status.get("wi-entry", min_version=2) is not None
    assert entries() == []  # inside the deadline: awaiting_visibility, nothing to reconcile
    harness.clock.advance(timedelta(seconds=31))
    for _ in range(2):
        view = status.get("wi-entry", min_version=2)
        assert view is not None
        assert view.answer is not None
        assert view.answer.visibility == "propagation_exceeded"
    raised = entries()
    assert [(row["PartitionKey"], row["RowKey"], row["entry_state"]) for row in raised] == [
        ("wi-entry", "propagation-exceeded-0000000002", "open")
    ]
    report = harness.claimcheck.reconciler.run()
    assert (report.propagation_exceeded, report.propagation_resolved) == (["wi-entry v2"], [])
    assert any(alert.startswith("wi-entry v2: reserved but still not visible") for alert in report.alerts)

    # Propagation completes late (what the producer, or the reconciler's activation, does after the
    # publish is confirmed): the version becomes visible.
    work_items = WorkItemStore(
        AzureEntityTable(harness.tables.get_table_client(harness.settings.work_items_table))
    )
    work_items.confirm_version("wi-entry", 2, None, now=harness.clock.now)
    report = harness.claimcheck.reconciler.run()
    assert (report.propagation_exceeded, report.propagation_resolved) == ([], ["wi-entry v2"])
    assert [row["entry_state"] for row in entries()] == ["resolved"]
    assert harness.claimcheck.reconciler.run().propagation_resolved == []  # resolved once


def test_a_caching_status_reader_never_confirms_the_old_version_as_current(make_harness: Build) -> None:
    """Seed 10, a cache returning the old object: a status reading through a cache that still holds
    version 1 after version 2 was confirmed answers awaiting_visibility / re_read for version 2 and for
    the latest — never version 1 as current, never "version 2 unknown"; once the cache expires, v2."""
    harness = make_harness()
    producer = harness.claimcheck.producer
    values: dict[str, Any] = {**FIELDS, "content_type": "text/plain", "work_item_id": "wi-cached"}
    table = AzureEntityTable(harness.tables.get_table_client(harness.settings.work_items_table))
    registry = PayloadRegistry(
        AzureEntityTable(harness.tables.get_table_client(harness.settings.registry_table))
    )
    cache = CachingWorkItemReader(WorkItemStore(table), ttl=timedelta(minutes=5), clock=harness.clock)
    cached_status = WorkItemStatus(cache, registry, clock=harness.clock)

    assert producer.submit(document(50_000), **values).version == 1
    first = cached_status.get("wi-cached", min_version=1)  # the cache now holds version 1
    assert first is not None
    assert first.answer is not None
    assert (first.answer.visibility, first.version) == ("version_confirmed", 1)
    assert producer.submit(document(50_001), **values, if_match=1).version == 2

    answers = []
    for min_version in (2, None):
        view = cached_status.get("wi-cached", min_version=min_version)
        assert view is not None
        assert view.answer is not None
        answers.append((view.answer.visibility, view.answer.next_action, view.latest_receipt))
    assert answers == [("awaiting_visibility", "re_read", None)] * 2
    still_one = cached_status.get("wi-cached", min_version=1)  # "at least 1" is still true
    assert still_one is not None
    assert still_one.answer is not None
    assert still_one.answer.visibility in ("version_confirmed", "conflict_detected")

    harness.clock.advance(timedelta(minutes=6))  # the cache entry expires: the table's row is read
    fresh = cached_status.get("wi-cached", min_version=2)
    assert fresh is not None
    assert fresh.answer is not None
    assert (fresh.answer.visibility, fresh.version) == ("version_confirmed", 2)
