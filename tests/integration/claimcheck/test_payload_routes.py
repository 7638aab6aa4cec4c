"""Payload routing by purpose against Azurite: evidence goes to its own container and is never deleted
before its retention or its container's lock.

Azurite has no immutability policies (version-level WORM is not emulated): these tests prove where the app
writes and that it never *asks* to delete a locked object early. That Azure then refuses such a delete is
the service's guarantee; the container and its policy are asserted under Pulumi mocks
(tests/infra/test_storage_rules.py).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from azure.storage.blob import BlobServiceClient
from claimcheck import Complete
from claimcheck.adapters.blobs import AzureBlobPayloadStore
from claimcheck.errors import PublishNotConfirmed
from claimcheck.routing import PayloadRoutes
from claimcheck.settings import SettingsError
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]
LOCK_DAYS = 30


def _routed(make_harness: Build, *, locked: bool = False) -> tuple[Harness, str]:
    evidence = f"evidence-{uuid.uuid4().hex[:10]}"
    harness = make_harness(
        purpose_containers={"evidence-archive": evidence},
        immutable_containers={evidence: LOCK_DAYS} if locked else {},
    )
    return harness, evidence


def _names(harness: Harness, container: str) -> list[str]:
    blobs = BlobServiceClient.from_connection_string(harness.connection)
    return [blob.name for blob in blobs.get_container_client(container).list_blobs()]


def test_evidence_goes_to_its_own_container_and_stays_after_processing(make_harness: Build) -> None:
    """evidence-archive writes to its container and retains; contract-review stays in the shared one and
    is deleted after use; the retained object goes only once its retention has elapsed, with proof."""
    harness, evidence = _routed(make_harness)
    kept = harness.claimcheck.producer.submit(
        io.BytesIO(document(40_000)),
        tenant_id="tenant-a",
        purpose="evidence-archive",
        classification="restricted",
        content_type="text/plain",
    )
    assert _names(harness, evidence) == [kept.payload_ref]
    assert harness.blob_names() == []
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert _names(harness, evidence) == [kept.payload_ref]  # retained: never deleted after use

    used = harness.claimcheck.producer.submit(
        io.BytesIO(document(40_000)),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="restricted",
        content_type="text/plain",
    )
    assert harness.blob_names() == [used.payload_ref]
    assert consume_and_settle(harness.claimcheck.consumer, harness.delivery()) == Complete()
    assert harness.blob_names() == []  # sync cleanup, in the shared container
    assert _names(harness, evidence) == [kept.payload_ref]

    assert harness.claimcheck.reconciler.run(harness.clock.now + timedelta(days=29)).retention_removed == []
    later = harness.claimcheck.reconciler.run(harness.clock.now + timedelta(days=31))
    assert later.retention_removed == [kept.payload_ref]
    assert _names(harness, evidence) == []
    reasons = {row["PartitionKey"]: row["reason"] for row in harness.rows(harness.settings.audit_table)}
    assert reasons[kept.payload_ref] == "retention period elapsed"


def test_an_orphan_in_a_locked_container_waits_out_the_lock(make_harness: Build) -> None:
    """A lost publish leaves a provisional evidence object; in a container locked for 30 days the
    reconciler reports it waiting (in days) instead of deleting it after the usual grace."""
    harness, evidence = _routed(make_harness, locked=True)
    harness.bus.fail_next = 1
    with pytest.raises(PublishNotConfirmed):
        harness.claimcheck.producer.submit(
            document(20_000),
            tenant_id="tenant-a",
            purpose="evidence-archive",
            classification="restricted",
            content_type="text/plain",
        )
    (ref,) = _names(harness, evidence)
    # An unregistered provisional object too (a producer crash right after its upload).
    stray = f"ref_{uuid.uuid4().hex}"
    container = BlobServiceClient.from_connection_string(harness.connection).get_container_client(evidence)
    AzureBlobPayloadStore(container).upload_provisional(
        stray, io.BytesIO(document(5_000)), content_type="text/plain", max_bytes=10_000
    )

    after_grace = harness.clock.now + timedelta(seconds=harness.settings.orphan_grace_seconds + 60)
    waiting = harness.claimcheck.reconciler.run(after_grace)
    assert waiting.orphans_removed == []
    assert waiting.errors == []
    assert waiting.orphans_waiting == [ref]
    assert any("removed in 29 d" in alert for alert in waiting.alerts), waiting.alerts
    assert sorted(_names(harness, evidence)) == sorted([ref, stray])

    unlocked = harness.claimcheck.reconciler.run(harness.clock.now + timedelta(days=LOCK_DAYS, minutes=1))
    assert sorted(unlocked.orphans_removed) == sorted([ref, stray])
    assert _names(harness, evidence) == []


def test_a_deleting_purpose_in_a_locked_container_is_refused_naming_the_setting(make_harness: Build) -> None:
    """The app refuses at start what infra refuses at preview: its deletes would fail on Azure."""
    evidence = f"evidence-{uuid.uuid4().hex[:10]}"
    with pytest.raises(SettingsError, match=r"CLAIMCHECK_IMMUTABLE_CONTAINERS.*'bulk-ingest'"):
        make_harness(
            purpose_containers={"evidence-archive": evidence, "bulk-ingest": evidence},
            immutable_containers={evidence: LOCK_DAYS},
        )
    routes = PayloadRoutes("payloads", {"evidence-archive": evidence}, {evidence: LOCK_DAYS})
    assert routes.containers() == ("payloads", evidence)
    assert routes.container_for("bulk-ingest") == "payloads"
