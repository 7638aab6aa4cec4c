"""Regenerate the generated sample documents byte for byte (no timestamps, no randomness).

    python -m scripts.make_samples           # write supply-agreement.pdf, master-agreement-large.txt
    python -m scripts.make_samples --check   # exit 1 if the committed files differ from what this builds

The PDF writer is deliberately minimal (no PDF writer package is a dependency): one Helvetica Type1
font with WinAnsiEncoding, each page a content stream of text lines (BT ... Tj T* ... ET), and a
cross-reference table with exact byte offsets, which is all pypdf needs to extract the text.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from datetime import date, timedelta
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples" / "contracts"

PAGE_WIDTH, PAGE_HEIGHT = 612, 792  # US Letter, in points
MARGIN = 72
FONT_SIZE = 11
LEADING = 14
WRAP_COLUMNS = 88  # about what fits between the margins in 11 pt Helvetica

SUPPLY_AGREEMENT_PAGES = [
    [
        "SUPPLY AGREEMENT",
        "",
        'This Supply Agreement is made on March 2, 2026 between Fabrikam Components GmbH ("Supplier") '
        'and Tailspin Toys Ltd. ("Buyer").',
        "",
        "1. Supply",
        "1.1 The Supplier shall deliver 5,000 units of part TT-220 to the warehouse of the Buyer "
        "by 2026-05-15.",
        "1.2 The Supplier must provide a certificate of conformity with each shipment.",
        "",
        "2. Price and Payment",
        "2.1 The Buyer shall pay each invoice within 45 days of delivery.",
        "2.2 Prices are fixed for the term of this Agreement.",
    ],
    [
        "3. Quality",
        "3.1 The Buyer will inspect each shipment and report any defect no later than June 30, 2026.",
        "3.2 The Supplier agrees to replace defective units within 10 business days of a defect report.",
        "",
        "4. Liability",
        "4.1 The Supplier shall indemnify the Buyer against third-party claims arising from defective units.",
    ],
    [
        "5. Term",
        "5.1 This Agreement will remain in force until 31/12/2027.",
        "",
        "Signed for the Supplier: A. Becker, Managing Director.",
        "Signed for the Buyer: R. Singh, Procurement Lead.",
    ],
]


def _pdf_string(line: str) -> bytes:
    escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("cp1252") + b")"


def _page_content(lines: list[str]) -> bytes:
    wrapped = [part for line in lines for part in (textwrap.wrap(line, WRAP_COLUMNS) or [""])]
    operations = [
        b"BT",
        f"/F1 {FONT_SIZE} Tf {LEADING} TL {MARGIN} {PAGE_HEIGHT - MARGIN} Td".encode(),
    ]
    for line in wrapped:
        operations.append(_pdf_string(line) + b" Tj T*" if line else b"T*")
    operations.append(b"ET")
    return b"\n".join(operations) + b"\n"


def build_pdf(pages: list[list[str]]) -> bytes:
    """A valid PDF 1.4 file with one page per list of text lines ("" is an empty line)."""
    page_ids = [4 + 2 * index for index in range(len(pages))]  # each page is followed by its content
    kids = " ".join(f"{page_id} 0 R" for page_id in page_ids)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for page_id, lines in zip(page_ids, pages, strict=True):
        content = _page_content(lines)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {PAGE_WIDTH} {PAGE_HEIGHT}] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n".encode() + content + b"endstream")
    # The binary comment on line 2 tells transfer tools the file is binary, as the spec recommends.
    output = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(output))
        output += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref_offset = len(output)
    # Each cross-reference entry is exactly 20 bytes: 10-digit offset, 5-digit generation, type, EOL.
    output += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        output += f"{offset:010d} 00000 n \n".encode()
    output += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    output += f"startxref\n{xref_offset}\n%%EOF\n".encode()
    return bytes(output)


MASTER_TOPICS = [
    "data migration",
    "integration testing",
    "user training",
    "security review",
    "performance tuning",
    "reporting dashboards",
]
MASTER_SECTIONS = 60
MASTER_SECTIONS_PER_PAGE = 20
MASTER_FIRST_DUE_DATE = date(2026, 2, 2)


def _master_section(number: int) -> str:
    topic = MASTER_TOPICS[(number - 1) % len(MASTER_TOPICS)]
    due = MASTER_FIRST_DUE_DATE + timedelta(weeks=number - 1)
    return (
        f"{number}. Work Package {number}: {topic}\n"
        "\n"
        f"{number}.1 The Consultant shall deliver the {topic} report for work package {number} "
        f"by {due.isoformat()}.\n"
        "\n"
        f"{number}.2 The Client shall approve or reject that report within 10 business days of receipt.\n"
        "\n"
        f"{number}.3 The scope of work package {number} covers {topic} for the systems listed in "
        f"Annex {number}. It includes planning, execution and a closing review with the project board. "
        "Progress is tracked in the shared project plan, which both teams update every week with the "
        "status of open tasks, the risks found so far and the decisions taken at the weekly meeting. "
        "Changes to the scope are agreed in writing through the change procedure in the general terms, "
        "and no change takes effect before both project managers have recorded it in the change log.\n"
        "\n"
    )


def build_master_agreement() -> str:
    """A ~50 KB contract (over the 16 KiB inline threshold) with 120 obligations on 3 pages."""
    preamble = (
        "MASTER SERVICES AGREEMENT\n"
        "\n"
        "This Master Services Agreement is made on 5 January 2026 between Litware Holdings plc "
        '("Client") and Adventure Works Consulting LLC ("Consultant").\n'
        "\n"
    )
    pages = []
    for first in range(1, MASTER_SECTIONS + 1, MASTER_SECTIONS_PER_PAGE):
        pages.append("".join(_master_section(n) for n in range(first, first + MASTER_SECTIONS_PER_PAGE)))
    closing = (
        f"{MASTER_SECTIONS + 1}. General Terms\n"
        "\n"
        "Late delivery of a work package report gives the Client the right to a service credit of 2% "
        "of the fee for that work package for each week of delay.\n"
    )
    return preamble + "\f".join(pages) + closing


def build_samples() -> dict[Path, bytes]:
    return {
        SAMPLES_DIR / "supply-agreement.pdf": build_pdf(SUPPLY_AGREEMENT_PAGES),
        SAMPLES_DIR / "master-agreement-large.txt": build_master_agreement().encode("utf-8"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    arguments = parser.parse_args(argv)
    stale = []
    for path, content in build_samples().items():
        if arguments.check:
            if not path.is_file() or path.read_bytes() != content:
                stale.append(path)
            continue
        path.write_bytes(content)
        print(f"wrote {path.relative_to(SAMPLES_DIR.parent.parent)} ({len(content)} bytes)")
    for path in stale:
        print(f"out of date: {path} (run python -m scripts.make_samples)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
