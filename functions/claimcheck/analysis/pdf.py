"""Segments of a PDF document, page by page, through pypdf (imported only when a PDF arrives)."""

from __future__ import annotations

import logging
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
        # pypdf raises many exception types on malformed input (PdfReadError, ValueError,
        # KeyError, RecursionError...); any of them means the same thing to the caller.
        try:
            self._reader: PdfReader = PdfReader(document)
            encrypted = self._reader.is_encrypted
            self.page_count = 0 if encrypted else len(self._reader.pages)
        except Exception as exc:
            raise _unreadable(exc) from exc
        if encrypted:
            raise AnalysisError("PDF is encrypted; encrypted documents are not analyzed")
        self.truncated = self.page_count > MAX_PDF_PAGES

    def segments(self) -> Iterator[Segment]:
        splitter = SentenceSplitter()
        for index in range(min(self.page_count, MAX_PDF_PAGES)):
            try:
                text = self._reader.pages[index].extract_text()
            except Exception as exc:
                raise _unreadable(exc) from exc
            for sentence in splitter.feed(text) + splitter.flush():
                yield Segment(index + 1, sentence)
