"""Segments of a PDF document, page by page, through pypdf (imported only when a PDF arrives)."""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from claimcheck.analysis.model import AnalysisError
from claimcheck.analysis.segments import Segment, SentenceSplitter

if TYPE_CHECKING:
    from pypdf import PdfReader

MAX_PDF_PAGES = 500

# pypdf logs parsing problems with excerpts of the file ("invalid pdf header: b'...'"), which
# would put document bytes in our logs; its failures reach us as exceptions anyway. This module
# is imported only when a PDF is analyzed, so the setting applies exactly when pypdf is in use.
logging.getLogger("pypdf").setLevel(logging.CRITICAL + 1)


def _malformed_input_errors() -> tuple[type[Exception], ...]:
    """What pypdf raises on malformed or hostile input: its own errors, and the built-in ones its parser
    lets escape from a broken file (a missing key, a bad index or type, a failed assertion, a reference
    cycle, arithmetic on garbage numbers, a filter it does not implement, broken zlib or struct data).
    Not OSError (reading our own spooled copy failed: the delivery is retried) nor MemoryError."""
    from pypdf.errors import PyPdfError

    return (
        PyPdfError,
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        AttributeError,
        AssertionError,
        RecursionError,
        ArithmeticError,
        NotImplementedError,
        zlib.error,
        struct.error,
    )


def _unreadable(exc: Exception) -> AnalysisError:
    # Only the exception type: pypdf messages can quote raw bytes of the document.
    return AnalysisError(f"unreadable PDF ({type(exc).__name__})")


class PdfSource:
    """Segments of each page's extracted text, in page order.

    The PDF is opened eagerly so a corrupt or encrypted file fails before any analysis starts.
    A sentence that runs over a page break becomes two segments, one per page, so every
    obligation has a single page reference.
    """

    def __init__(self, document: BinaryIO) -> None:
        from pypdf import PdfReader  # lazy: keeps `import claimcheck.analysis` cheap

        document.seek(0)
        # pypdf raises many exception types on malformed input; each means the same to the caller.
        malformed = _malformed_input_errors()
        try:
            self._reader: PdfReader = PdfReader(document)
            encrypted = self._reader.is_encrypted
            self.page_count = 0 if encrypted else len(self._reader.pages)
        except malformed as exc:
            raise _unreadable(exc) from exc
        if encrypted:
            raise AnalysisError("PDF is encrypted; encrypted documents are not analyzed")
        self.truncated = self.page_count > MAX_PDF_PAGES

    def segments(self) -> Iterator[Segment]:
        splitter = SentenceSplitter()
        malformed = _malformed_input_errors()
        for index in range(min(self.page_count, MAX_PDF_PAGES)):
            try:
                text = self._reader.pages[index].extract_text()
            except malformed as exc:
                raise _unreadable(exc) from exc
            for sentence in splitter.feed(text) + splitter.flush():
                yield Segment(index + 1, sentence)
