"""Large documents against Azurite: an analyzer that declares the head it reads (``reads_leading_bytes``)
gets exactly that verified head, kept in memory, while the whole object is still downloaded and verified.

What is asserted is what the process did, not how long it took: the bytes it wrote through ``write()``
(``/proc/self/io``'s ``wchar``: a spool rolled over to a temporary file writes the document there) and
the bytes the analyzer was handed.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

import psutil
import pytest
from azure.data.tables import UpdateMode
from azure.storage.blob import ContentSettings
from claimcheck import Complete, DeadLetter, DeadLetterReason
from claimcheck.analysis import AnalysisResult
from claimcheck.integrity import SPOOL_MEMORY_BYTES
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, RecordingAnalyzer, StandInResult, document

Build = Callable[..., Harness]

HEAD = 64 * 1024
LARGE = 32 * 1024 * 1024  # four times the spool's memory threshold, eight 4 MiB ranges
MIB = 1024 * 1024


@dataclass
class HeadAnalyzer(RecordingAnalyzer):
    """Declares that it reads the first ``HEAD`` bytes; records what it was handed."""

    reads_leading_bytes: int = HEAD
    held: list[int] = field(default_factory=list)  # how many bytes each document it got holds

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        self.held.append(document.seek(0, io.SEEK_END))
        document.seek(0)
        return super().analyze(document, content_type)


@dataclass
class DigestingAnalyzer(RecordingAnalyzer):
    """Declares nothing (the whole document); records the sha256 and length of what it read."""

    digests: list[tuple[int, str]] = field(default_factory=list)

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        digest, length = hashlib.sha256(), 0
        while chunk := document.read(MIB):
            digest.update(chunk)
            length += len(chunk)
        self.digests.append((length, digest.hexdigest()))
        return StandInResult()  # type: ignore[return-value]


def submit(harness: Harness, payload: bytes) -> str:
    receipt = harness.claimcheck.producer.submit(
        payload,
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    return receipt.payload_ref


def written_chars() -> int:
    """Bytes this process has passed to write() so far, files and sockets alike (/proc/self/io)."""
    return int(psutil.Process().io_counters().write_chars)


def test_a_head_reading_analyzer_gets_only_the_verified_head_and_nothing_is_spooled_to_disk(
    make_harness: Build,
) -> None:
    harness = make_harness()
    payload = document(LARGE)
    submit(harness, payload)
    analyzer = HeadAnalyzer()
    consumer = harness.another_consumer(analyzer).consumer
    before = written_chars()
    assert consume_and_settle(consumer, harness.delivery()) == Complete()
    written = written_chars() - before
    assert analyzer.seen == [payload[:HEAD]]
    assert analyzer.held == [HEAD]  # the document handed over holds the head and nothing more
    # The requests' own bytes only: a 32 MB spool rolled over to disk would have written 32 MB.
    assert written < MIB, f"{written} B written while consuming"
    assert harness.blob_names() == []  # processed and cleaned up as any other


def test_a_whole_document_analyzer_still_gets_every_verified_byte(make_harness: Build) -> None:
    """No declaration: the whole object is spooled as before (to disk beyond the memory threshold)."""
    harness = make_harness()
    payload = document(LARGE)
    submit(harness, payload)
    analyzer = DigestingAnalyzer()
    consumer = harness.another_consumer(analyzer).consumer
    before = written_chars()
    assert consume_and_settle(consumer, harness.delivery()) == Complete()
    written = written_chars() - before
    assert analyzer.digests == [(LARGE, hashlib.sha256(payload).hexdigest())]
    # The measure above can see a spool: this one rolled over and wrote the rest of the document.
    assert written >= LARGE - SPOOL_MEMORY_BYTES


SIZE = 6 * MIB  # two ranges; the tampering is past the first one and far past the head


@pytest.mark.parametrize(
    "replacement",
    [
        pytest.param(document(SIZE - 10) + b"TAMPERED!\n", id="same-length-other-tail"),
        pytest.param(document(SIZE) + b"more", id="longer"),
        pytest.param(document(SIZE - 1), id="shorter"),
    ],
)
@pytest.mark.parametrize("etag", ["recorded", "re-pointed"])
def test_an_object_tampered_beyond_the_head_is_refused_and_never_analyzed(
    make_harness: Build, replacement: bytes, etag: str
) -> None:
    """Bytes other than the recorded ones beyond the head dead-letter integrity_failed as before, and
    the analyzer is never called. ``re-pointed``: the registry row is given the new object's ETag, as
    if the storage itself had corrupted the bytes, so the ETag condition passes and only the length
    and sha256 over the whole object can catch it."""
    harness = make_harness()
    payload = document(SIZE)
    ref = submit(harness, payload)
    assert replacement[:HEAD] == payload[:HEAD]
    written = harness.container.get_blob_client(ref).upload_blob(
        replacement, overwrite=True, content_settings=ContentSettings(content_type="text/plain")
    )
    if etag == "re-pointed":
        registry = harness.tables.get_table_client(harness.settings.registry_table)
        (entity,) = registry.list_entities()
        entity["object_etag"] = written["etag"]
        registry.update_entity(entity, mode=UpdateMode.MERGE)
    analyzer = HeadAnalyzer()
    outcome = consume_and_settle(harness.another_consumer(analyzer).consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.INTEGRITY_FAILED
    assert (analyzer.seen, harness.results()) == ([], [])
    (row,) = harness.rows(harness.settings.registry_table)
    assert (row["state"], row["content_length"]) == ("integrity_failed", SIZE)
    assert harness.blob_names() == [ref]  # kept for investigation
