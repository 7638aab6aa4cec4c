"""Documents the analyzer cannot read fail with AnalysisError that names the problem, not the content."""

from __future__ import annotations

import io
import logging

import pytest
from claimcheck.analysis import AnalysisError
from pypdf import PdfReader, PdfWriter

from tests.unit.analysis.support import SAMPLES, analyze_bytes

SUPPLY_PDF = (SAMPLES / "supply-agreement.pdf").read_bytes()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"SECRET-CONTENT is not a PDF",
        b"%PDF-1.4\n%%EOF\n",
        SUPPLY_PDF[: len(SUPPLY_PDF) // 2],
        SUPPLY_PDF[: SUPPLY_PDF.index(b"xref")],
    ],
    ids=["empty", "not-a-pdf", "header-only", "cut-in-half", "no-xref"],
)
def test_corrupt_pdf_raises_analysis_error_caused_by_pypdf(data: bytes) -> None:
    """A corrupt PDF fails with AnalysisError chained to pypdf's error, never another exception type."""
    with pytest.raises(AnalysisError, match=r"^unreadable PDF \(\w+\)$") as raised:
        analyze_bytes(data, "application/pdf")
    assert raised.value.__cause__ is not None


def test_corrupt_pdf_leaves_no_document_bytes_in_logs(caplog: pytest.LogCaptureFixture) -> None:
    """pypdf's own warnings, which quote file bytes, are not emitted while a PDF is analyzed."""
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AnalysisError):
        analyze_bytes(b"SECRET-CONTENT is not a PDF", "application/pdf")
    assert "SECRET" not in caplog.text


def test_encrypted_pdf_is_rejected() -> None:
    """A PDF encrypted with pypdf's writer (AES-128) is refused as encrypted."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(SUPPLY_PDF)))
    writer.encrypt(user_password="reader-secret", algorithm="AES-128")
    encrypted = io.BytesIO()
    writer.write(encrypted)

    with pytest.raises(AnalysisError, match="encrypted"):
        analyze_bytes(encrypted.getvalue(), "application/pdf")


def test_text_that_is_not_utf8_is_rejected_with_its_offset() -> None:
    """Latin-1 text fails as not UTF-8, with the byte offset and without quoting the text."""
    data = "CONTRATANTE: Aurora Comércio Ltda.".encode("latin-1")
    with pytest.raises(AnalysisError, match=r"not valid UTF-8 \(near byte offset 23\)") as raised:
        analyze_bytes(data)
    assert "Aurora" not in str(raised.value)


@pytest.mark.parametrize(
    "content_type", ["image/png", "application/json", "text/html", "", "application/pdfx"]
)
def test_unsupported_content_type_is_rejected(content_type: str) -> None:
    """Anything but text/plain and application/pdf is refused by name."""
    with pytest.raises(AnalysisError, match="unsupported content type"):
        analyze_bytes(b"The Supplier shall deliver.", content_type)


def test_text_in_another_charset_is_rejected() -> None:
    """text/plain declared in a non-UTF-8 charset is refused rather than misread."""
    with pytest.raises(AnalysisError, match="unsupported text charset 'iso-8859-1'"):
        analyze_bytes(b"The Supplier shall deliver.", "text/plain; charset=ISO-8859-1")
