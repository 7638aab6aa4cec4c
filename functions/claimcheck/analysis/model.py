"""What an analysis produces, the one error it raises, and the port the consumer calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from claimcheck.errors import ClaimCheckError

OBLIGATION_TEXT_LIMIT = 300


class AnalysisError(ClaimCheckError):
    """The document cannot be analyzed (unreadable PDF, text that is not UTF-8, unsupported type...).

    The message names the problem and never quotes document content, because it travels into
    dead-letter descriptions and logs.
    """


@dataclass(frozen=True)
class Obligation:
    """One sentence that binds someone to do something."""

    party: str | None
    text: str  # the sentence, whitespace collapsed, at most OBLIGATION_TEXT_LIMIT characters
    # ISO date (YYYY-MM-DD) when the sentence names one; a relative deadline such as
    # "within 30 days" is kept verbatim because it has no calendar date without a reference.
    due_date: str | None
    page: int  # 1-based

    def to_dict(self) -> dict[str, Any]:
        return {"party": self.party, "text": self.text, "due_date": self.due_date, "page": self.page}


@dataclass(frozen=True)
class AnalysisResult:
    document_type: str  # "contract" | "document"
    parties: tuple[str, ...]
    dates: tuple[str, ...]  # distinct ISO dates found anywhere, sorted
    obligations: tuple[Obligation, ...]  # in document order
    page_count: int
    review_required: bool
    priority: str  # "high" | "normal"
    # True when a limit cut the result short (obligations, dates or PDF pages); the document
    # itself was still read to the end for parties, review and priority unless pages were cut.
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_type": self.document_type,
            "parties": list(self.parties),
            "dates": list(self.dates),
            "obligations": [obligation.to_dict() for obligation in self.obligations],
            "page_count": self.page_count,
            "review_required": self.review_required,
            "priority": self.priority,
            "truncated": self.truncated,
        }


class Analyzer(Protocol):
    """The consumer's processing step. It is only called once the whole stored object is verified
    (length, sha256, declared type).

    An analyzer that reads only the beginning of a document declares it with an optional attribute
    ``reads_leading_bytes: int`` (a positive number of bytes; see ``leading_bytes_read``): ``document``
    then holds exactly the object's first ``reads_leading_bytes`` bytes (fewer if the object is shorter),
    in memory, and the consumer keeps nothing else of it. Without the attribute ``document`` is the
    whole object, spooled to a temporary file beyond a few MiB.
    """

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        """Analyze a verified, seekable binary document; raise AnalysisError if it cannot be read."""
        ...


READ_BOUND_ATTRIBUTE = "reads_leading_bytes"


def leading_bytes_read(analyzer: Analyzer) -> int | None:
    """How many leading bytes of a document ``analyzer`` reads (its ``reads_leading_bytes``); None when
    it does not say, which means the whole document.

    Raises ``ValueError`` naming the attribute when it is set to anything but a positive int, so a
    misdeclared analyzer is refused when the consumer is built, not guessed at.
    """
    bound = getattr(analyzer, READ_BOUND_ATTRIBUTE, None)
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int) or bound <= 0:
        raise ValueError(
            f"{type(analyzer).__name__}.{READ_BOUND_ATTRIBUTE} must be a positive number of bytes or absent"
        )
    return bound
