"""`claimcheck-ops trace WORK_ITEM`: one document's journey from the local stack's spans.

Reads the OTLP JSON lines the local Functions host writes (``.local-stack/telemetry/spans.jsonl``,
claimcheck.adapters.telemetry_setup) and prints every intake and delivery of the work item, each with
its stages under it, offsets from the first intake. On Azure the same spans are in Application Insights (the
transaction search of the work item's operation); this command reads only the local files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from scripts.ops_errors import OpsError
from scripts.ops_options import TelemetryDirOption
from scripts.ops_output import Column, print_json, print_table

if TYPE_CHECKING:
    from rich.console import Console

    from scripts.telemetry_files import TimelineRow

COLUMNS = (
    Column("offset_ms", "at ms"),
    Column("duration_ms", "ms"),
    Column("span"),
    Column("version"),
    Column("outcome", text=True),
    Column("trace", optional=True),
    Column("links_to", optional=True),
)


def _row(row: TimelineRow) -> dict[str, object]:
    from claimcheck.telemetry import DEAD_LETTER_REASON, OUTCOME, PAYLOAD_VERSION, TRANSPORT

    span, attributes = row.span, row.span.attributes
    outcome = attributes.get(OUTCOME) or ("error" if span.status == "error" else "")
    if attributes.get(DEAD_LETTER_REASON):
        outcome = f"{outcome}: {attributes[DEAD_LETTER_REASON]}"
    elif span.status == "error" and attributes.get("error.type"):
        outcome = f"error: {attributes['error.type']}"
    version = attributes.get(PAYLOAD_VERSION)
    transport = attributes.get(TRANSPORT)
    return {
        "offset_ms": f"{row.offset_ms:.1f}",
        "duration_ms": f"{span.duration_ms:.1f}",
        "span": "  " * row.depth + span.name,
        "version": "" if version is None else f"v{version}" + (f" {transport}" if transport else ""),
        "outcome": outcome,
        "trace": span.trace_id[:12] if row.depth == 0 else "",
        "links_to": ", ".join(row.linked_to),
    }


def trace(
    work_item_id: Annotated[str, typer.Argument(help="The work item id from the receipt.")],
    telemetry_dir: TelemetryDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Print a document's timeline (intake, deliveries, their stages) from the local stack's spans."""
    # The attribute names come from the claimcheck package, which CI's ops environment does not have:
    # imported here, so the other commands load without it.
    from scripts.ops_local import telemetry_default
    from scripts.telemetry_files import read_spans, timeline

    telemetry_dir = telemetry_default(telemetry_dir)
    spans = read_spans(telemetry_dir)
    if not spans:
        raise OpsError(
            f"no spans in {telemetry_dir}: is the local stack running (python -m local.stack), or give "
            "--telemetry-dir <its data folder>/telemetry"
        )
    rows = timeline(spans, work_item_id)
    if not rows:
        raise OpsError(
            f"no spans for work item {work_item_id} in {telemetry_dir} (spans are written about a second "
            "after each stage)"
        )
    if as_json:
        print_json(
            [
                {
                    "offset_ms": round(row.offset_ms, 3),
                    "duration_ms": round(row.span.duration_ms, 3),
                    "depth": row.depth,
                    "name": row.span.name,
                    "trace_id": row.span.trace_id,
                    "span_id": row.span.span_id,
                    "parent_span_id": row.span.parent_id,
                    "links": [
                        {"trace_id": trace_id, "span_id": span_id} for trace_id, span_id in row.span.links
                    ],
                    "status": row.span.status,
                    "attributes": dict(row.span.attributes),
                }
                for row in rows
            ]
        )
        return
    print_timeline(work_item_id, rows)


def print_timeline(work_item_id: str, rows: list[TimelineRow], console: Console | None = None) -> None:
    traces = len({row.span.trace_id for row in rows})
    title = f"Work item {work_item_id}: {len(rows)} spans in {traces} trace{'s' * (traces != 1)}"
    print_table(title, [_row(row) for row in rows], COLUMNS, console=console)
