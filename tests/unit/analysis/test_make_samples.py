"""The sample generator is deterministic and its minimal PDF is well formed."""

from __future__ import annotations

import io
import re

from pypdf import PdfReader

from scripts.make_samples import SUPPLY_AGREEMENT_PAGES, build_pdf, build_samples


def test_committed_generated_samples_match_the_generator() -> None:
    """The committed PDF and large text are byte-for-byte what the generator builds today."""
    for path, content in build_samples().items():
        assert path.read_bytes() == content, f"{path.name} is stale: run python -m scripts.make_samples"


def test_generator_output_is_identical_across_runs() -> None:
    """Two builds give identical bytes (no timestamps, no randomness)."""
    assert build_samples() == build_samples()


def test_pdf_cross_reference_offsets_point_at_their_objects() -> None:
    """Every xref entry gives the exact byte offset of its `n 0 obj` header, and startxref the table."""
    pdf = build_pdf(SUPPLY_AGREEMENT_PAGES)
    xref_start = int(re.search(rb"startxref\n(\d+)\n%%EOF\n$", pdf).group(1))  # type: ignore[union-attr]
    assert pdf[xref_start:].startswith(b"xref\n0 10\n0000000000 65535 f \n")
    entries = re.findall(rb"(\d{10}) 00000 n \n", pdf[xref_start:])
    assert len(entries) == 9
    for number, offset in enumerate(map(int, entries), start=1):
        assert pdf[offset:].startswith(f"{number} 0 obj\n".encode())


def test_pdf_reads_strictly_with_one_text_page_per_input_page() -> None:
    """pypdf in strict mode reads three pages whose text is the lines that were written."""
    pages = [["First page line."], ["Parentheses (kept) and \\ kept."], [""]]
    reader = PdfReader(io.BytesIO(build_pdf(pages)), strict=True)
    assert [page.extract_text() for page in reader.pages] == [
        "First page line.\n",
        "Parentheses (kept) and \\ kept.\n",
        "",
    ]
