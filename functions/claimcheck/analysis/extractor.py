"""The default analyzer: a deterministic, offline contract-obligation extractor."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import BinaryIO, Protocol

from claimcheck.analysis.clauses import (
    PartyIndex,
    find_dates,
    find_due_date,
    find_parties,
    is_contract_title,
    is_obligation,
    is_urgent,
    needs_review,
)
from claimcheck.analysis.model import OBLIGATION_TEXT_LIMIT, AnalysisError, AnalysisResult, Obligation
from claimcheck.analysis.segments import Segment, TextSource

MAX_OBLIGATIONS = 200
MAX_DATES = 100
MAX_PARTIES = 10
TEXT_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


class _Source(Protocol):
    page_count: int
    truncated: bool

    def segments(self) -> Iterator[Segment]: ...


def _open_source(document: BinaryIO, content_type: str) -> _Source:
    media_type, *parameters = (part.strip().lower() for part in content_type.split(";"))
    if media_type == "text/plain":
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip() == "charset" and value.strip().strip('"') not in TEXT_CHARSETS:
                raise AnalysisError(f"unsupported text charset {value.strip()!r}; only UTF-8 is analyzed")
        return TextSource(document)
    if media_type == "application/pdf":
        from claimcheck.analysis.pdf import PdfSource  # pypdf loads only for PDFs

        return PdfSource(document)
    raise AnalysisError(
        f"unsupported content type {media_type[:100]!r}; expected text/plain or application/pdf"
    )


def _clip(text: str) -> str:
    if len(text) <= OBLIGATION_TEXT_LIMIT:
        return text
    return text[: OBLIGATION_TEXT_LIMIT - 1].rstrip() + "…"


class _Findings:
    """Everything learned so far while the segments stream past; memory bounded by the MAX_* caps."""

    def __init__(self) -> None:
        self.parties = PartyIndex()
        self.dates: set[str] = set()
        self.obligations: list[Obligation] = []
        self.titled_contract = False
        self.review_required = False
        self.urgent = False
        self.obligations_truncated = False
        self.dates_truncated = False
        self._seen_first_segment = False

    def add(self, segment: Segment) -> None:
        text = segment.text
        if not self._seen_first_segment:
            self._seen_first_segment = True
            self.titled_contract = is_contract_title(text)
        # Parties are declared in the preamble; after the first obligation, "between" and
        # "Parties:" are ordinary words and would only add noise.
        if not self.obligations and len(self.parties.names) < MAX_PARTIES:
            for party in find_parties(text):
                self.parties.add(party)
        self._add_dates(find_dates(text))
        # Each check below stops once its answer is final: a large document costs little more.
        self.review_required = self.review_required or needs_review(text)
        self.urgent = self.urgent or is_urgent(text)
        if not self.obligations_truncated and is_obligation(text):
            self._add_obligation(segment)

    def _add_dates(self, dates: Iterable[str]) -> None:
        for found in dates:
            if found in self.dates:
                continue
            if len(self.dates) >= MAX_DATES:
                self.dates_truncated = True
                return
            self.dates.add(found)

    def _add_obligation(self, segment: Segment) -> None:
        if len(self.obligations) >= MAX_OBLIGATIONS:
            self.obligations_truncated = True
            return
        self.obligations.append(
            Obligation(
                party=self.parties.party_in(segment.text),
                text=_clip(segment.text),
                due_date=find_due_date(segment.text),
                page=segment.page,
            )
        )

    def result(self, page_count: int, source_truncated: bool) -> AnalysisResult:
        looks_like_contract = self.titled_contract or len(self.parties.names) >= 2
        return AnalysisResult(
            document_type="contract" if looks_like_contract and self.obligations else "document",
            parties=tuple(self.parties.names),
            dates=tuple(sorted(self.dates)),
            obligations=tuple(self.obligations),
            page_count=page_count,
            review_required=self.review_required,
            # Urgency is read from the content, never from the clock, so the same document
            # always gets the same priority (and the same routing) on every delivery.
            priority="high" if self.urgent else "normal",
            truncated=self.obligations_truncated or self.dates_truncated or source_truncated,
        )


class ContractObligationExtractor:
    """Finds parties, dates and obligations in English or Portuguese contracts (text/plain, PDF).

    Deterministic and offline: the same bytes always give the same result. Never logs content.
    """

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        """Analyze from the start of `document`; AnalysisError if it cannot be read as `content_type`.

        An OSError from reading a text document is not wrapped: it is the storage failing, not
        the document, and deserves a retry rather than a dead letter.
        """
        source = _open_source(document, content_type)
        findings = _Findings()
        for segment in source.segments():
            findings.add(segment)
        return findings.result(source.page_count, source.truncated)
