"""Streaming text: sentence splitting, pages, chunk boundaries, limits and content-type parameters."""

from __future__ import annotations

from claimcheck.analysis.model import OBLIGATION_TEXT_LIMIT
from claimcheck.analysis.segments import MAX_SEGMENT_CHARS, READ_CHUNK_BYTES, SentenceSplitter

from tests.unit.analysis.support import analyze_bytes


def _split(*pieces: str) -> list[str]:
    splitter = SentenceSplitter()
    segments = [segment for piece in pieces for segment in splitter.feed(piece)]
    return segments + splitter.flush()


def test_sentences_end_at_punctuation_blank_lines_and_numbered_clauses() -> None:
    """Sentence punctuation, blank lines and a line opening a numbered clause each end a segment."""
    text = "SUPPLY AGREEMENT\n\nPrices are fixed. The Buyer pays.\n2. Payment\n2.1 The Buyer shall pay.\n"
    assert _split(text) == [
        "SUPPLY AGREEMENT",
        "Prices are fixed.",
        "The Buyer pays.",
        "2.",
        "Payment",
        "2.1 The Buyer shall pay.",
    ]


def test_company_abbreviations_and_wrapped_dates_do_not_end_a_sentence() -> None:
    """ "Ltd. and", 'Ltd. ("Supplier")' and a line wrapped before "15 March 2026" stay in one sentence."""
    text = 'Made between Acme Ltd. ("Supplier") and Beta Ltd. and signed on\n15 March 2026.'
    assert _split(text) == ['Made between Acme Ltd. ("Supplier") and Beta Ltd. and signed on 15 March 2026.']


def test_splitting_does_not_depend_on_how_the_text_is_chunked() -> None:
    """Feeding one character at a time gives the same segments as feeding everything at once."""
    text = "1. Scope\n\n1.1 The Supplier shall deliver.  The Buyer must pay!\n\nAnnex A? Yes.\n"
    assert _split(*text) == _split(text)


def test_a_run_without_boundaries_is_cut_at_the_segment_limit() -> None:
    """A run longer than MAX_SEGMENT_CHARS is cut, so pending text never grows without bound."""
    segments = _split("x" * (MAX_SEGMENT_CHARS * 2 + 10))
    assert [len(segment) for segment in segments] == [MAX_SEGMENT_CHARS, MAX_SEGMENT_CHARS, 10]


def test_form_feeds_separate_pages_and_a_trailing_one_adds_no_page() -> None:
    """Obligations carry the form-feed page number; a final form feed does not count as a page."""
    result = analyze_bytes(b"The Buyer shall pay.\fPage two.\f\fThe Supplier must deliver.\f")
    assert [(item["page"], item["text"]) for item in result["obligations"]] == [
        (1, "The Buyer shall pay."),
        (4, "The Supplier must deliver."),
    ]
    assert result["page_count"] == 4


def test_multibyte_character_split_across_read_chunks_is_decoded() -> None:
    """A UTF-8 character whose bytes straddle two reads decodes correctly."""
    sentence = "A CONTRATADA deverá pagar.".encode()
    first_byte_of_a_acute = sentence.index("á".encode())
    prefix = b"a" * (READ_CHUNK_BYTES - 1 - first_byte_of_a_acute - 2) + b"\n\n"
    result = analyze_bytes(prefix + sentence)
    assert result["obligations"][0]["text"] == "A CONTRATADA deverá pagar."


def test_byte_order_mark_is_ignored() -> None:
    """A leading UTF-8 byte-order mark does not end up in the first sentence."""
    result = analyze_bytes("\ufeffSERVICE AGREEMENT\n\nThe Provider shall deliver.".encode())
    assert result["obligations"][0]["text"] == "The Provider shall deliver."
    assert result["document_type"] == "contract"


def test_long_obligation_text_is_clipped_with_an_ellipsis() -> None:
    """Obligation text is at most OBLIGATION_TEXT_LIMIT characters, ending with an ellipsis when cut."""
    sentence = "The Supplier shall " + "deliver spare parts " * 40 + "by 2026-05-15."
    obligation = analyze_bytes(sentence.encode())["obligations"][0]
    assert len(obligation["text"]) <= OBLIGATION_TEXT_LIMIT
    assert obligation["text"].startswith("The Supplier shall deliver spare parts")
    assert obligation["text"].endswith("spare parts…")
    assert obligation["due_date"] == "2026-05-15"


def test_content_type_parameters_and_case_are_accepted() -> None:
    """`Text/Plain; charset="UTF-8"` is plain UTF-8 text."""
    result = analyze_bytes(b"The Supplier shall deliver.", 'Text/Plain; charset="UTF-8"')
    assert len(result["obligations"]) == 1
