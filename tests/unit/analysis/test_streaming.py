"""Large documents stream through in bounded memory; results are deterministic; imports stay cheap."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from typing import BinaryIO, cast

import pytest
from claimcheck.analysis import MAX_OBLIGATIONS, ContractObligationExtractor
from claimcheck.analysis.segments import READ_CHUNK_BYTES

from tests.unit.analysis.support import SAMPLES, RepeatedTextStream, analyze_sample

CLAUSE = (
    b"7.3 The Supplier shall deliver the quarterly maintenance report to the Buyer by 2026-05-15, "
    b"using the template agreed at the kick-off meeting. The report covers incidents, changes and "
    b"the availability measured in the quarter, and it is reviewed by both project managers at the "
    b"next steering committee, which meets on the first working day of each month.\n\n"
)
PREAMBLE_THEN_CLAUSES = (
    b'MASTER AGREEMENT\n\nMade between Fabrikam Components GmbH ("Supplier") and Tailspin Toys Ltd. '
    b'("Buyer").\n\n' + CLAUSE
)


@pytest.mark.slow
def test_fifty_megabytes_of_text_stream_through_with_bounded_obligations() -> None:
    """A 50 MB text is read in fixed-size chunks and returns at most MAX_OBLIGATIONS, flagged truncated."""
    document = RepeatedTextStream(CLAUSE, 50 * 1024 * 1024)

    result = ContractObligationExtractor().analyze(cast(BinaryIO, document), "text/plain")

    assert document.tell() == 50 * 1024 * 1024
    assert document.largest_read == READ_CHUNK_BYTES
    assert len(result.obligations) == MAX_OBLIGATIONS
    assert result.truncated
    assert result.obligations[0].text == (
        "7.3 The Supplier shall deliver the quarterly maintenance report to the Buyer by 2026-05-15, "
        "using the template agreed at the kick-off meeting."
    )
    assert (result.dates, result.page_count, result.document_type) == (("2026-05-15",), 1, "document")


def test_memory_stays_bounded_while_a_large_text_is_analyzed() -> None:
    """Peak Python allocations stay far below the size of an 8 MB document."""
    document = RepeatedTextStream(PREAMBLE_THEN_CLAUSES, 8 * 1024 * 1024)
    tracemalloc.start()
    try:
        result = ContractObligationExtractor().analyze(cast(BinaryIO, document), "text/plain")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024
    assert result.truncated
    assert result.parties == ("Fabrikam Components GmbH", "Tailspin Toys Ltd.")


@pytest.mark.parametrize("name", sorted(path.name for path in SAMPLES.iterdir()))
def test_same_document_gives_the_same_json_safe_result(name: str) -> None:
    """Analyzing a sample twice gives equal dicts that survive a JSON round trip unchanged."""
    first = analyze_sample(name)
    assert analyze_sample(name) == first
    assert json.loads(json.dumps(first)) == first


def test_importing_the_package_does_not_load_pypdf() -> None:
    """pypdf is imported only when a PDF is analyzed, keeping `import claimcheck.analysis` cheap."""
    probe = "import sys, claimcheck.analysis; print('pypdf' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "False"
