"""Intake against Azurite: inline vs reference, limits, types, publish lost, read-after-write."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from claimcheck.envelope import MAX_REFERENCE_ENVELOPE_BYTES, parse_envelope
from claimcheck.errors import (
    ForbiddenContentType,
    IntakeRejected,
    PayloadTooLarge,
    PublishNotConfirmed,
    UnknownPurpose,
    WorkItemConflict,
)
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.settings import PROVISIONAL_TAG_NAME
from claimcheck.uploads import UploadMismatch, VerifyingReader

from tests.integration.claimcheck.conftest import PAYLOAD_MARKER, Harness, document

Build = Callable[..., Harness]


def test_small_public_payload_travels_inline(make_harness: Build) -> None:
    """A small non-sensitive payload rides in the message; nothing is stored in Blob Storage."""
    harness = make_harness()
    payload = document(300)
    receipt = harness.claimcheck.producer.submit(
        payload,
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="internal",
        content_type="text/plain",
    )
    assert receipt.transport == "inline"
    assert receipt.payload_ref is None
    envelope = parse_envelope(harness.queued()[0].body)
    assert envelope.payload_inline == payload
    assert harness.blob_names() == []
    assert harness.rows(harness.settings.registry_table) == []


def test_large_payload_goes_by_reference_with_a_small_envelope(make_harness: Build) -> None:
    """A confidential or large payload is stored; the envelope holds only a reference and stays ≤ 1 KiB."""
    harness = make_harness()
    payload = document(200_000)
    receipt = harness.claimcheck.producer.submit(
        io.BytesIO(payload),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
        correlation_id="corr-1",
        traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
    )
    message = harness.queued()[0]
    assert receipt.transport == "reference"
    assert len(message.body) <= MAX_REFERENCE_ENVELOPE_BYTES
    assert PAYLOAD_MARKER.encode() not in message.body
    assert b"http" not in message.body
    assert message.application_properties["traceparent"] == "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert message.session_id == receipt.work_item_id
    assert receipt.payload_ref is not None
    assert harness.blob_names() == [receipt.payload_ref]
    tags = harness.container.get_blob_client(receipt.payload_ref).get_blob_tags()
    assert tags[PROVISIONAL_TAG_NAME] == "active"
    (row,) = harness.rows(harness.settings.registry_table)
    assert (row["state"], row["content_length"], row["tenant_id"]) == ("available", 200_000, "tenant-a")


def test_payload_over_the_limit_is_refused_and_nothing_is_kept(make_harness: Build) -> None:
    """A stream longer than the limit gives 413 during upload; no object, record or message remains."""
    harness = make_harness(max_payload_bytes=100_000)
    with pytest.raises(PayloadTooLarge) as caught:
        harness.claimcheck.producer.submit(
            io.BytesIO(document(100_001)),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="restricted",
            content_type="text/plain",
        )
    assert caught.value.http_status == 413
    assert harness.blob_names() == []
    assert harness.rows(harness.settings.registry_table) == []
    assert harness.queued() == []


@pytest.mark.parametrize(
    ("content_type", "payload", "error"),
    [
        ("image/png", b"\x89PNG....", ForbiddenContentType),
        ("application/pdf", document(5000), ForbiddenContentType),  # declared PDF, bytes are text
    ],
)
def test_forbidden_or_false_type_is_refused(
    make_harness: Build, content_type: str, payload: bytes, error: type[IntakeRejected]
) -> None:
    """A type the purpose does not allow, or bytes that are not of the declared type, give 415."""
    harness = make_harness()
    with pytest.raises(error) as caught:
        harness.claimcheck.producer.submit(
            payload,
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type=content_type,
        )
    assert caught.value.http_status == 415
    assert harness.queued() == []
    assert harness.rows(harness.settings.registry_table) == []


def test_a_new_version_refused_while_streaming_gives_its_version_back(make_harness: Build) -> None:
    """On Azurite: a new version over one chunk (type-checked as it uploads, after its version was
    reserved) refused as text declared PDF leaves no version in flight. The status says version 2 was
    never accepted, and the corrected write with the same If-Match is version 2 at once (it used to get
    412 "version 2 is being written" for the in-flight window, then become version 3)."""
    harness = make_harness()
    fields: dict[str, Any] = {
        "tenant_id": "tenant-a",
        "purpose": "contract-review",
        "classification": "confidential",
    }
    first = harness.claimcheck.producer.submit(
        document(5000), content_type="text/plain", work_item_id="wi-refused-v2", **fields
    )
    with pytest.raises(ForbiddenContentType):
        harness.claimcheck.producer.submit(
            document(DEFAULT_CHUNK_BYTES + 1024),
            content_type="application/pdf",
            work_item_id="wi-refused-v2",
            if_match=1,
            **fields,
        )
    view = harness.claimcheck.status.get("wi-refused-v2", min_version=2)
    assert view is not None
    assert (view.visibility, view.version) == ("unknown_version", 1)
    corrected = harness.claimcheck.producer.submit(
        document(6000), content_type="text/plain", work_item_id="wi-refused-v2", if_match=1, **fields
    )
    assert (first.version, corrected.version) == (1, 2)
    assert len(harness.queued()) == 2


def test_unknown_purpose_is_a_400(make_harness: Build) -> None:
    """An unknown purpose is refused with code unknown_purpose before anything is stored."""
    harness = make_harness()
    with pytest.raises(UnknownPurpose) as caught:
        harness.claimcheck.producer.submit(
            b"x", tenant_id="t", purpose="poetry", classification="public", content_type="text/plain"
        )
    assert (caught.value.code, caught.value.http_status) == ("unknown_purpose", 400)


def test_lost_publish_leaves_a_state_the_reconciler_cleans(
    make_harness: Build, caplog: pytest.LogCaptureFixture
) -> None:
    """Upload done, publish lost: 503 and a provisional object that reconciliation removes after grace."""
    harness = make_harness()
    harness.bus.fail_next = 1
    with pytest.raises(PublishNotConfirmed) as caught:
        harness.claimcheck.producer.submit(
            document(50_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
        )
    assert caught.value.http_status == 503
    (ref,) = harness.blob_names()
    assert harness.container.get_blob_client(ref).get_blob_tags()[PROVISIONAL_TAG_NAME] == "provisional"
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["preparing"]

    with caplog.at_level(logging.INFO, logger="claimcheck.reconciler"):
        waiting = harness.claimcheck.reconciler.run()
    assert waiting.orphans_waiting == [ref]
    (summary,) = [r for r in caplog.records if r.getMessage().startswith("reconciliation finished")]
    # The orphan-count alert of the stack queries these dimensions, or the text when the host drops them.
    assert summary.custom_dimensions["orphans_found"] == 1  # type: ignore[attr-defined]
    assert "orphans_found=1 " in summary.getMessage()
    assert any("publish not confirmed" in alert and "removed in" in alert for alert in waiting.alerts)
    assert harness.blob_names() == [ref]

    harness.clock.advance(timedelta(seconds=harness.settings.orphan_grace_seconds + 1))
    done = harness.claimcheck.reconciler.run()
    assert done.orphans_removed == [ref]
    assert harness.blob_names() == []
    assert [row["state"] for row in harness.rows(harness.settings.registry_table)] == ["removed"]
    (proof,) = harness.rows(harness.settings.audit_table)
    assert proof["PartitionKey"] == ref
    assert "publish never confirmed" in proof["reason"]


def test_after_a_lost_publish_intake_refuses_at_once_then_tries_again(make_harness: Build) -> None:
    """The circuit opens on a lost publish: the next submission is a 503 with Retry-After before
    anything is stored; after the cool-down one trial goes to the broker and its success closes it."""
    harness = make_harness(publish_cool_down_seconds=1)
    values = {
        "tenant_id": "tenant-a",
        "purpose": "contract-review",
        "classification": "confidential",
        "content_type": "text/plain",
    }
    harness.bus.fail_next = 1
    with pytest.raises(PublishNotConfirmed):
        harness.claimcheck.producer.submit(document(50_000), **values)  # type: ignore[arg-type]
    stored = (harness.blob_names(), harness.rows(harness.settings.work_items_table))
    with pytest.raises(PublishNotConfirmed) as refused:
        harness.claimcheck.producer.submit(document(50_000), **values)  # type: ignore[arg-type]
    assert "nothing was stored" in str(refused.value)
    assert 0 < refused.value.retry_after <= 1
    assert (harness.blob_names(), harness.rows(harness.settings.work_items_table)) == stored
    time.sleep(1.1)  # the cool-down (a wait, not a measurement)
    receipt = harness.claimcheck.producer.submit(document(50_000), **values)  # type: ignore[arg-type]
    assert receipt.version == 1
    assert len(harness.queued()) == 1


def test_status_answers_unknown_version_until_the_version_is_confirmed(make_harness: Build) -> None:
    """status.get(min_version=N) says unknown_version for an N never reserved, version_confirmed at N."""
    harness = make_harness()
    status = harness.claimcheck.status
    assert status.get("wi-unknown") is None
    assert status.get("wi-unknown", min_version=1).state == "unknown_version"  # type: ignore[union-attr]
    first = harness.claimcheck.producer.submit(
        b"first " + PAYLOAD_MARKER.encode(),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="public",
        content_type="text/plain",
        work_item_id="wi-raw-1",
    )
    view = status.get("wi-raw-1", min_version=2)
    assert view is not None
    assert (view.visibility, view.version) == ("unknown_version", 1)  # version 2 is not reserved yet
    second = harness.claimcheck.producer.submit(
        b"second " + PAYLOAD_MARKER.encode(),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="public",
        content_type="text/plain",
        work_item_id="wi-raw-1",
    )
    assert (first.version, second.version) == (1, 2)
    assert first.record_etag != second.record_etag
    confirmed = status.get("wi-raw-1", min_version=2)
    assert confirmed is not None
    assert (confirmed.visibility, confirmed.state, confirmed.version) == ("version_confirmed", "accepted", 2)
    assert confirmed.latest_receipt is not None
    assert confirmed.latest_receipt.request_id == second.request_id
    assert (confirmed.receipt_versions, confirmed.payload_state) == ((1, 2), "inline")
    assert status.get("wi-raw-1", tenant_id="tenant-b") is None
    # What the HTTP layer sends: the JSON round trip keeps the facts the caller acts on.
    view_json = json.loads(json.dumps(confirmed.to_dict()))
    assert (view_json["visibility"], view_json["state"]) == ("version_confirmed", "accepted")
    assert view_json["version"] == 2
    assert (view_json["receipt_versions"], view_json["payload_state"]) == ([1, 2], "inline")
    assert view_json["latest_receipt"]["request_id"] == second.request_id
    receipt_json = json.loads(json.dumps(second.to_dict()))
    assert (receipt_json["work_item_id"], receipt_json["version"]) == ("wi-raw-1", 2)
    assert receipt_json["request_id"] == second.request_id
    assert receipt_json["record_etag"] == second.record_etag


def test_concurrent_submissions_for_one_work_item_get_one_version_each_or_409(
    make_harness: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two submissions racing for the same next version: one wins, the other gets work_item_conflict."""
    harness = make_harness()
    work_items = harness.claimcheck.producer._work_items
    both_read = threading.Barrier(2, timeout=30)
    original_get = work_items.get

    reads = iter(range(2))  # only the two reservation reads meet at the barrier

    def get_then_wait(work_item_id: str) -> Any:
        found = original_get(work_item_id)
        if next(reads, None) is not None:
            both_read.wait()  # both submissions have read the same current version
        return found

    monkeypatch.setattr(work_items, "get", get_then_wait)

    def submit() -> object:
        try:
            return harness.claimcheck.producer.submit(
                document(2000),
                tenant_id="tenant-a",
                purpose="contract-review",
                classification="restricted",
                content_type="text/plain",
                work_item_id="wi-race",
            )
        except WorkItemConflict as conflict:
            return conflict

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda _: submit(), range(2)))
    conflicts = [outcome for outcome in outcomes if isinstance(outcome, WorkItemConflict)]
    assert len(conflicts) == 1
    assert conflicts[0].http_status == 409
    assert len(harness.queued()) == 1


@pytest.mark.parametrize("failure", ["over_the_limit", "staged_bytes_differ"])
def test_a_stream_refused_after_its_first_chunk_leaves_no_work_item(
    make_harness: Build, failure: str
) -> None:
    """Found by review: a fresh work item's reservation runs at once with the upload of a stream longer
    than one chunk, so an upload refused past its first chunk (413, or a direct upload's 422 when the
    staged bytes differ from the declaration) left the reserved row of an id nobody was given, for ever."""
    size = 5 * 1024 * 1024  # more than one chunk (integrity.DEFAULT_CHUNK_BYTES)
    payload = document(size)
    harness = make_harness(max_payload_bytes=size - 1 if failure == "over_the_limit" else size)
    stream = io.BytesIO(payload)
    source = stream if failure == "over_the_limit" else VerifyingReader(stream, length=size, sha256="0" * 64)
    with pytest.raises((PayloadTooLarge, UploadMismatch)):
        harness.claimcheck.producer.submit(
            source,
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="restricted",
            content_type="text/plain",
        )
    assert harness.rows(harness.settings.work_items_table) == []
    assert harness.rows(harness.settings.registry_table) == []
    assert harness.queued() == []
