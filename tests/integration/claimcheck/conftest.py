"""Fixtures for the claim-check integration tests: real Azurite, real SDKs, an in-memory bus.

A package-wide logging handler records every log line emitted while these tests run; when the last
test of the directory is done, its finalizer proves no payload bytes or secrets leaked, whatever the
test order (a leak fails the run as a teardown error).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient
from claimcheck import ClaimCheck, InboundMessage, OutboundMessage, Settings
from claimcheck.adapters.azure import provision_storage
from claimcheck.analysis import AnalysisResult
from claimcheck.testing import InMemoryBus

from local.azurite import ACCOUNT_KEY

# Every payload a test stores contains this marker, so the log check can look for payload bytes.
PAYLOAD_MARKER = "PAYLOAD-BYTES-7f3a9c"


class RecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name}: {text}")


SESSION_LOGS = RecordingHandler()


@pytest.fixture(scope="package", autouse=True)
def _record_all_logs() -> Iterator[RecordingHandler]:
    root = logging.getLogger()
    previous = root.level
    root.addHandler(SESSION_LOGS)
    root.setLevel(logging.DEBUG)
    try:
        yield SESSION_LOGS
    finally:
        root.removeHandler(SESSION_LOGS)
        root.setLevel(previous)
    assert_no_leaks(SESSION_LOGS.lines)


# Payload texts of the tests (the marker, two versions' bodies, the document's sentence) and secrets.
FORBIDDEN_IN_LOGS = (
    PAYLOAD_MARKER,
    "VERSION-ONE",
    "VERSION-TWO",
    "Supplier shall deliver",
    ACCOUNT_KEY,
    "AccountKey=",
    "sig=",
    "SharedAccessSignature",
)


def assert_no_leaks(lines: list[str]) -> None:
    text = "\n".join(lines)
    for forbidden in FORBIDDEN_IN_LOGS:
        assert forbidden not in text, f"{forbidden[:12]}… leaked into the logs"


def document(size: int, *, marker: str = PAYLOAD_MARKER) -> bytes:
    """A deterministic plain-text contract-like document of exactly ``size`` bytes with the marker."""
    line = f"The Supplier shall deliver the goods. {marker}\n".encode()
    return (line * (size // len(line) + 1))[:size]


@dataclass(frozen=True)
class StandInResult:
    """A stand-in for AnalysisResult with the fields the consumer uses."""

    document_type: str = "contract"
    priority: str = "normal"
    review_required: bool = False
    parties: tuple[str, ...] = ()
    obligations: tuple[str, ...] = ()
    page_count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"document_type": self.document_type, "priority": self.priority}


@dataclass
class RecordingAnalyzer:
    """Records the exact bytes it was given; ``before`` runs first (to inject races)."""

    seen: list[bytes] = field(default_factory=list)
    before: Callable[[], None] | None = None

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        if self.before is not None:
            self.before()
        self.seen.append(document.read())
        return StandInResult()  # type: ignore[return-value]


class Clock:
    """A settable clock, so expiry and grace periods are tested without sleeping."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@dataclass
class Harness:
    claimcheck: ClaimCheck
    bus: InMemoryBus
    analyzer: RecordingAnalyzer
    clock: Clock
    settings: Settings
    sleeps: list[float]
    container: ContainerClient
    tables: TableServiceClient
    connection: str

    def queued(self) -> list[OutboundMessage]:
        return self.bus.messages(self.settings.documents_queue)

    def results(self) -> list[OutboundMessage]:
        return self.bus.messages(self.settings.results_topic)

    def delivery(self, index: int = -1, *, count: int = 1) -> InboundMessage:
        sent = self.queued()[index]
        return InboundMessage(
            body=sent.body,
            message_id=sent.message_id,
            delivery_count=count,
            session_id=sent.session_id,
            correlation_id=sent.correlation_id,
            application_properties=dict(sent.application_properties),
            enqueued_time=self.clock.now,
        )

    def rows(self, table: str) -> list[dict[str, Any]]:
        return [dict(entity) for entity in self.tables.get_table_client(table).list_entities()]

    def blob_names(self) -> list[str]:
        return [blob.name for blob in self.container.list_blobs()]

    def another_consumer(
        self, analyzer: RecordingAnalyzer, *, sleep: Callable[[float], None] | None = None
    ) -> ClaimCheck:
        return ClaimCheck.from_settings(
            self.settings,
            storage_connection=self.connection,
            bus=self.bus,
            analyzer=analyzer,
            clock=self.clock,
            sleep=sleep or self.sleeps.append,
        )


def unique_settings(**settings_changes: Any) -> Settings:
    """Test settings naming fresh, uniquely named tables and container in the shared Azurite."""
    suffix = uuid.uuid4().hex[:10]
    return replace(
        Settings(environment="test"),
        payload_container=f"payloads-{suffix}",
        registry_table=f"registry{suffix}",
        idempotency_table=f"idempotency{suffix}",
        work_items_table=f"workitems{suffix}",
        audit_table=f"audit{suffix}",
        results_table=f"results{suffix}",
        inline_threshold_bytes=1024,
        **settings_changes,
    )


def build_harness(storage_connection_string: str, **settings_changes: Any) -> Harness:
    """A ClaimCheck on fresh, uniquely named tables and container in the shared Azurite."""
    # Every purpose in the test's own container unless a test routes (test_payload_routes).
    settings = unique_settings(**({"purpose_containers": {}} | settings_changes))
    bus, analyzer, clock = InMemoryBus(), RecordingAnalyzer(), Clock()
    sleeps: list[float] = []  # the consumer's visibility polls record their delays instead of sleeping
    provision_storage(settings, storage_connection_string)
    claimcheck = ClaimCheck.from_settings(
        settings,
        storage_connection=storage_connection_string,
        bus=bus,
        analyzer=analyzer,
        clock=clock,
        sleep=sleeps.append,
    )
    blobs = BlobServiceClient.from_connection_string(storage_connection_string)
    return Harness(
        claimcheck=claimcheck,
        bus=bus,
        analyzer=analyzer,
        clock=clock,
        settings=settings,
        sleeps=sleeps,
        container=blobs.get_container_client(settings.payload_container),
        tables=TableServiceClient.from_connection_string(storage_connection_string),
        connection=storage_connection_string,
    )


@pytest.fixture
def make_harness(storage_connection_string: str) -> Callable[..., Harness]:
    """Build a ClaimCheck on fresh, uniquely named tables and container in the shared Azurite."""

    def build(**settings_changes: Any) -> Harness:
        return build_harness(storage_connection_string, **settings_changes)

    return build
