"""Turn a document into a stream of sentence-sized segments, each tagged with its page.

Memory stays bounded whatever the document size: text is decoded chunk by chunk and a segment
never grows past MAX_SEGMENT_CHARS (a longer run without a sentence boundary is cut there).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from claimcheck.analysis.model import AnalysisError

READ_CHUNK_BYTES = 64 * 1024
MAX_SEGMENT_CHARS = 4000
FORM_FEED = "\f"

# A sentence ends at . ! or ? followed by whitespace and something that can start a sentence
# (so "Acme Ltd. and Beta" and 'Acme Ltd. ("Supplier")' stay whole), at a blank line, or
# before a line that opens a numbered clause such as "2.1 The Supplier" / "3. Payment" (the
# number needs a dot, so a wrapped line starting "15 March 2026" is not cut).
_BOUNDARY = re.compile(
    r"""(?<=[.!?])\s+(?=["“0-9A-ZÀ-Ý])
      | \n[ \t]*\n\s*
      | \n[ \t]*(?=\d+\.(?:\d+\.?)*[ \t]+[A-ZÀ-Ý])""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Segment:
    page: int  # 1-based
    text: str  # whitespace collapsed, never empty


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


class SentenceSplitter:
    """Incremental sentence splitter: feed text in pieces, get complete segments back."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        buffer = self._pending + text
        segments: list[str] = []
        start = 0
        for boundary in _BOUNDARY.finditer(buffer):
            segments.append(buffer[start : boundary.start()])
            start = boundary.end()
        rest = buffer[start:]
        while len(rest) > MAX_SEGMENT_CHARS:
            segments.append(rest[:MAX_SEGMENT_CHARS])
            rest = rest[MAX_SEGMENT_CHARS:]
        self._pending = rest
        return [text for text in map(collapse_whitespace, segments) if text]

    def flush(self) -> list[str]:
        rest, self._pending = collapse_whitespace(self._pending), ""
        return [rest] if rest else []


class TextSource:
    """Segments of a UTF-8 text document; form feeds separate pages.

    page_count is the last page with any text once segments() has been consumed, so a trailing
    form feed (common in pdftotext output) does not count as an empty extra page.
    """

    def __init__(self, document: BinaryIO) -> None:
        self._document = document
        self.page_count = 1
        self.truncated = False  # text is always read to the end

    def segments(self) -> Iterator[Segment]:
        # utf-8-sig drops a leading byte-order mark, which editors on Windows like to add.
        decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
        splitter = SentenceSplitter()
        page = 1
        offset = 0
        self._document.seek(0)
        while True:
            chunk = self._document.read(READ_CHUNK_BYTES)
            final = not chunk
            try:
                text = decoder.decode(chunk, final=final)
            except UnicodeDecodeError as exc:
                raise AnalysisError(
                    f"text/plain document is not valid UTF-8 (near byte offset {offset + exc.start})"
                ) from exc
            offset += len(chunk)
            *full_pages, text = text.split(FORM_FEED)
            for page_text in full_pages:
                for sentence in splitter.feed(page_text) + splitter.flush():
                    yield self._on_page(page, sentence)
                page += 1
            for sentence in splitter.feed(text):
                yield self._on_page(page, sentence)
            if final:
                break
        for sentence in splitter.flush():
            yield self._on_page(page, sentence)

    def _on_page(self, page: int, sentence: str) -> Segment:
        self.page_count = page
        return Segment(page, sentence)
