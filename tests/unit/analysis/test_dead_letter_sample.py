"""The README's dead-letter walkthrough sample: intake accepts it, the analyzer cannot read it."""

from __future__ import annotations

import io

import pytest
from claimcheck.analysis import AnalysisError, ContractObligationExtractor
from claimcheck.integrity import check_declared_type

from tests.unit.analysis.support import SAMPLES

DAMAGED = SAMPLES.parent / "dead-letter" / "damaged-contract.pdf"


def test_the_damaged_pdf_passes_intake_but_not_the_analyzer() -> None:
    """So it is accepted (202) and then dead-lettered `processing_failed`, as the README shows."""
    data = DAMAGED.read_bytes()
    check_declared_type("application/pdf", data[:1024])  # intake's sniff: a PDF header, no 415
    with pytest.raises(AnalysisError, match="unreadable PDF"):
        ContractObligationExtractor().analyze(io.BytesIO(data), "application/pdf")
