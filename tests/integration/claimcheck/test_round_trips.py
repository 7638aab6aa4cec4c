"""The hot path's storage round trips, counted on the real SDK pipelines against Azurite.

Each request the Blob and Table clients actually send is recorded by azure-core's request hook
(local/storage_requests.py), so the ceilings below fail as soon as a change adds a round trip to
intake or consumption; lower them when a change removes one. Counts are requests, not latency:
requests sent in parallel count one each.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from claimcheck import ClaimCheck, Complete, InboundMessage, Settings
from claimcheck.adapters.azure import provision_storage
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.envelope import parse_envelope
from claimcheck.idempotency import Claimed, IdempotencyLedger, result_effect_key
from claimcheck.intake_keys import INTAKE_LEASE
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.testing import InMemoryBus, consume_and_settle

from local.storage_requests import StorageRequests, Tally
from tests.integration.claimcheck.conftest import Clock, RecordingAnalyzer, document, unique_settings

# (intake, consumption) ceilings per path; the breakdown of a failure names every request.
BY_REFERENCE_CEILING = (6, 12)
INLINE_CEILING = (2, 6)
# Sequential steps of the by-reference path (intake, consumption): requests sent at once are one step.
BY_REFERENCE_STEPS = (2, 6)
# Long enough that a request sent at once with another never starts a pace after it, on a busy machine.
PACE_SECONDS = 0.25
# Intake with an Idempotency-Key adds the key's insert and its completion.
IDEMPOTENCY_KEY_EXTRA = 2


@dataclass
class Counted:
    claimcheck: ClaimCheck
    bus: InMemoryBus
    settings: Settings
    requests: StorageRequests
    connection: str

    def consume_last(self) -> None:
        sent = self.bus.messages(self.settings.documents_queue)[-1]
        outcome = consume_and_settle(
            self.claimcheck.consumer,
            InboundMessage(
                body=sent.body,
                message_id=sent.message_id,
                delivery_count=1,
                session_id=sent.session_id,
                correlation_id=sent.correlation_id,
                application_properties=dict(sent.application_properties),
                enqueued_time=None,
            ),
        )
        assert outcome == Complete()


@pytest.fixture
def counted(storage_connection_string: str) -> Counted:
    return _counted(storage_connection_string, StorageRequests())


@pytest.fixture
def paced(storage_connection_string: str) -> Counted:
    return _counted(storage_connection_string, StorageRequests(pace=PACE_SECONDS))


def _counted(storage_connection_string: str, requests: StorageRequests) -> Counted:
    settings = unique_settings()
    bus = InMemoryBus()
    provision_storage(settings, storage_connection_string)
    claimcheck = ClaimCheck.from_settings(
        settings,
        storage_connection=storage_connection_string,
        bus=bus,
        analyzer=RecordingAnalyzer(),
        clock=Clock(),
        sleep=lambda seconds: None,
        request_hook=requests.hook,
    )
    return Counted(claimcheck, bus, settings, requests, storage_connection_string)


def _check(what: str, tally: Tally, ceiling: int) -> None:
    print(f"{what}: {tally.total} storage requests ({tally.summary()})")
    assert tally.total <= ceiling, f"{what} sent {tally.total} > {ceiling} requests: {tally.summary()}"


def test_by_reference_round_trips(counted: Counted) -> None:
    """A confidential document (stored, sync cleanup): intake and consumption within their ceilings."""
    with counted.requests.measure() as intake:
        receipt = counted.claimcheck.producer.submit(
            document(20_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
        )
    assert receipt.transport == "reference"
    with counted.requests.measure() as consumption:
        counted.consume_last()
    _check("intake by reference", intake, BY_REFERENCE_CEILING[0])
    _check("consumption by reference", consumption, BY_REFERENCE_CEILING[1])


def test_by_reference_critical_path(paced: Counted) -> None:
    """Requests sent at once count as one step: intake and consumption within their step ceilings."""
    with paced.requests.measure() as intake:
        paced.claimcheck.producer.submit(
            document(20_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
        )
    with paced.requests.measure() as consumption:
        paced.consume_last()
    for what, tally, ceiling in (
        ("intake by reference", intake, BY_REFERENCE_STEPS[0]),
        ("consumption by reference", consumption, BY_REFERENCE_STEPS[1]),
    ):
        print(f"{what}: {tally.steps} sequential steps of {tally.total} requests")
        assert tally.steps <= ceiling, f"{what}: {tally.steps} steps > {ceiling}: {tally.summary()}"


def test_inline_round_trips(counted: Counted) -> None:
    """A small internal document travels inline: no blob request at all."""
    with counted.requests.measure() as intake:
        receipt = counted.claimcheck.producer.submit(
            document(300),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
        )
    assert receipt.transport == "inline"
    with counted.requests.measure() as consumption:
        counted.consume_last()
    assert not [label for label in intake.labels + consumption.labels if label.startswith("blob")]
    _check("intake inline", intake, INLINE_CEILING[0])
    _check("consumption inline", consumption, INLINE_CEILING[1])


def test_idempotency_key_adds_two_requests(counted: Counted) -> None:
    """The HTTP route's Idempotency-Key costs its insert and its completion, nothing more."""
    keys = counted.claimcheck.intake_keys
    assert keys is not None

    def write() -> object:
        return counted.claimcheck.producer.submit(
            document(20_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
        )

    with counted.requests.measure() as intake:
        keys.once(uuid.uuid4().hex, "fingerprint", write)  # type: ignore[arg-type]
    _check(
        "intake by reference with an Idempotency-Key", intake, BY_REFERENCE_CEILING[0] + IDEMPOTENCY_KEY_EXTRA
    )
    assert INTAKE_LEASE  # the key's row is leased, not a permanent lock (claimcheck.intake_keys)


@pytest.mark.parametrize("failing", ["reservation", "registry record"])
def test_a_failed_reservation_or_record_leaves_no_stored_object(
    counted: Counted, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A generated work item's reservation and (a payload of one chunk, hashed before any request) its
    registry record are written while its document uploads: when either fails, the stored object is
    removed at once instead of waiting for the reconciler's orphan sweep."""
    producer = counted.claimcheck.producer
    target, method = (
        (producer._work_items, "reserve") if failing == "reservation" else (producer._registry, "create")
    )

    def unavailable(*args: object, **kwargs: object) -> object:
        raise ConnectionError("table storage unreachable")

    monkeypatch.setattr(target, method, unavailable)
    with pytest.raises(ConnectionError):
        counted.claimcheck.producer.submit(
            document(20_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
        )
    blobs = BlobServiceClient.from_connection_string(counted.connection)
    assert list(blobs.get_container_client(counted.settings.payload_container).list_blobs()) == []


@pytest.mark.parametrize(("size", "downloads"), [(20_000, 1), (DEFAULT_CHUNK_BYTES + 1, 0)])
def test_an_effect_completed_by_a_rival_costs_a_large_document_no_download(
    counted: Counted, size: int, downloads: int
) -> None:
    """A one-chunk document is fetched together with the claim (and discarded when the claim finds the
    effect done); a larger one only once the claim is held, so a delivery racing a rival that has just
    completed the effect (its record not settled yet, as here) never pays the whole transfer."""
    counted.claimcheck.producer.submit(
        document(size),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    envelope = parse_envelope(counted.bus.messages(counted.settings.documents_queue)[-1].body)
    key = result_effect_key(envelope.work_item_id, envelope.payload_version, envelope.purpose)
    ledger = IdempotencyLedger(
        AzureEntityTable(
            TableServiceClient.from_connection_string(counted.connection).get_table_client(
                counted.settings.idempotency_table
            )
        ),
        lease=timedelta(seconds=counted.settings.claim_lease_seconds),
    )
    rival = ledger.begin(key, now=datetime.now(UTC))
    assert isinstance(rival, Claimed)
    ledger.complete(rival, {"obligations": 0}, now=datetime.now(UTC))
    with counted.requests.measure() as racing:
        counted.consume_last()
    print(f"delivery racing a completed effect, {size} B: {racing.summary()}")
    assert racing.by_label()["blob get blob"] == downloads
