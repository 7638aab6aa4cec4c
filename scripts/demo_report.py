"""Pure formatting for `make demo`: progress lines, consumer steps, host-log parsing and the tables.

Consumer steps are built only from what the system reported for a document. The consumer runs its
pipeline in one fixed order (claimcheck/consumer.py: resolve → authorize → fetch + verify → analyze →
result written → event published → cleanup) and stops at the first failure, so a report of a later
step ("completed" in the host log, state completed in the status API) stands for the steps before it.
A dead-lettered document shows where it stopped (from its dead-letter reason) and why (the
description the consumer gave), never steps it did not reach.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from claimcheck.outcome import DeadLetterReason
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scripts.demo_cases import COMPLETED, Case
from scripts.telemetry_files import StageTiming

# Where the consumer stops for each dead-letter reason (claimcheck/consumer.py raises them there).
STOP_STEPS: Mapping[DeadLetterReason, str] = {
    DeadLetterReason.INVALID_ENVELOPE: "read envelope",
    DeadLetterReason.UNSUPPORTED_SCHEMA_VERSION: "read envelope",
    DeadLetterReason.EXPIRED: "authorize (grant expired)",
    DeadLetterReason.ACCESS_DENIED: "resolve + authorize",
    DeadLetterReason.VERSION_MISMATCH: "work-item version (superseded)",
    DeadLetterReason.PAYLOAD_MISSING: "resolve / fetch",
    DeadLetterReason.INTEGRITY_FAILED: "fetch + verify",
    DeadLetterReason.CONTENT_TYPE_MISMATCH: "authorize / verify",
    DeadLetterReason.PROCESSING_FAILED: "analyze / retries",
}
# Payload states in which the consumer keeps the stored object for investigation.
KEPT_PAYLOAD_STATES = frozenset({"integrity_failed", "missing", "access_denied"})
# Without a terminal rich would wrap at 80 columns; logs and CI pages are wider than that.
NON_TERMINAL_WIDTH = 160
CLEANUP_BY_PAYLOAD_STATE: Mapping[str, str] = {
    "inline": "nothing stored (inline)",
    "removed": "payload removed",
    "cleanup_pending": "pending (asynchronous sweep)",
    "processed": "object kept (processed)",
}


@dataclass(frozen=True)
class HostLogEvent:
    """One consumer-side INFO line of the Functions host log, about one work item or message."""

    kind: str  # "completed" | "cleanup" | "retry"
    subject: str  # a work item id (completed, cleanup) or a message id (retry)
    detail: str


_HOST_LOG_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("completed", re.compile(r"claimcheck\.consumer: completed (?P<subject>\S+) (?P<detail>v\d+)$")),
    (
        "cleanup",
        re.compile(
            r"claimcheck\.cleanup: payload removed: .*work_item=(?P<subject>\S+) .*reason=(?P<detail>.+)$"
        ),
    ),
    (
        "retry",
        re.compile(r"claimcheck\.function_app: retrying message (?P<subject>\S+) (?P<detail>in .+)$"),
    ),
)


def parse_host_log_line(line: str) -> HostLogEvent | None:
    """The consumer event a host log line reports, or None for any other line."""
    for kind, pattern in _HOST_LOG_PATTERNS:
        match = pattern.search(line.rstrip("\n"))
        if match:
            return HostLogEvent(kind, match["subject"], match["detail"])
    return None


def progress_line(elapsed: float, name: str, stage: str, text: str) -> str:
    """`[ 12.3s] service-agreement.txt           intake       202 inline v1 sha256 30ff2e6e…`."""
    return f"[{elapsed:5.1f}s] {name:<32} {stage:<12} {text}"


def intake_text(receipt: Mapping[str, Any]) -> str:
    """The intake receipt in one line: status, transport, version and the start of the sha256."""
    transport = "by reference" if receipt["transport"] == "reference" else "inline"
    return f"202 {transport} v{receipt['version']} sha256 {str(receipt['sha256'])[:8]}…"


def result_brief(summary: Mapping[str, Any]) -> str:
    """The status API's result summary: obligations, parties, review and priority."""
    review = "review required" if summary.get("review_required") else "no review"
    return (
        f"{summary.get('document_type', '?')}: {summary.get('obligations', '?')} obligations, "
        f"{summary.get('parties', '?')} parties, {review}, priority {summary.get('priority', '?')}"
    )


def status_text(case: Case) -> str:
    """What the status API last said: state, payload state and, once completed, the result summary."""
    text = f"{case.state} · payload {case.payload_state or '-'}"
    if case.result is not None:
        text += f" · {result_brief(case.result)}"
    return text


def stop_step(reason: str) -> str:
    """The pipeline step a dead-letter reason comes from ("?" for a reason the consumer never gives)."""
    try:
        return STOP_STEPS[DeadLetterReason(reason)]
    except ValueError:
        return "?"


def dead_letter_text(case: Case) -> str:
    text = f"{case.outcome} at {stop_step(str(case.outcome))}: {case.dead_letter_description or '-'}"
    if case.payload_state in KEPT_PAYLOAD_STATES:
        text += f"; object kept ({case.payload_state})"
    return text


def consumer_steps(case: Case) -> str:
    """The consumer's steps for this document, as far as the system reported them."""
    retried = f"retried {len(case.retries)} times → " if case.retries else ""
    if case.dead_letter_description is not None:
        return f"{retried}✗ {dead_letter_text(case)}"
    if not (case.consumer_completed or case.state == COMPLETED):
        return f"{retried}resolve → authorize → running…" if case.state == "running" else f"{retried}…"
    verify = "verify inline" if case.transport == "inline" else "resolve → authorize → fetch + verify"
    steps = [f"{verify} (sha256, length, type)", "analyze", "result written", "event published"]
    cleanup = case.cleanup or CLEANUP_BY_PAYLOAD_STATE.get(case.payload_state or "")
    if cleanup:
        steps.append(f"cleanup: {cleanup}")
    return retried + " → ".join(steps)


def outcome_text(case: Case) -> str:
    if case.outcome is None:
        return "…"
    if case.outcome == COMPLETED and case.result is not None:
        return f"completed · {result_brief(case.result)}"
    return case.outcome


# Below this many columns the journey table is the compact one: every column of the full table would be
# squeezed until Rich cut headers and cells ("Docume…"), the subscriptions among them.
FULL_JOURNEY_WIDTH = 140
# Below this many the compact table also leaves the tenant out (in the progress lines and the summary).
TENANT_COLUMN_WIDTH = 100


def journey_table(cases: list[Case], width: int = NON_TERMINAL_WIDTH) -> Table:
    """The journey of every document: in full from FULL_JOURNEY_WIDTH columns, else one line per
    document (name, result, subscriptions: what the demo exists to show, never cut), which fits an
    80x24 terminal with the ten documents."""
    if width < FULL_JOURNEY_WIDTH:
        return _compact_journey_table(cases, with_tenant=width >= TENANT_COLUMN_WIDTH)
    table = Table(title="Claim-check journey", expand=True)
    table.add_column("Document", ratio=2)
    table.add_column("Tenant", no_wrap=True)
    table.add_column("Intake → queue", ratio=2)
    table.add_column("Consumer steps", ratio=5)
    table.add_column("Result / dead-letter reason", ratio=3)
    table.add_column("Subscriptions", ratio=2)
    for case in cases:
        style = _style(case)
        outcome = outcome_text(case)
        table.add_row(
            case.title,
            case.tenant,
            case.intake,
            consumer_steps(case),
            Text(outcome, style=style),
            ", ".join(case.subscriptions),
        )
    return table


def _style(case: Case) -> str:
    return "green" if case.outcome == COMPLETED else ("red" if case.outcome else "")


def _compact_journey_table(cases: list[Case], *, with_tenant: bool) -> Table:
    table = Table(title="Claim-check journey", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("Document", overflow="fold")
    if with_tenant:
        table.add_column("Tenant", no_wrap=True)
    table.add_column("Result", no_wrap=True)
    table.add_column("Subscriptions", no_wrap=True)
    for case in cases:
        result = case.outcome or case.state
        cells: list[str | Text] = [case.name, *([case.tenant] if with_tenant else [])]
        table.add_row(*cells, Text(result, style=_style(case)), ", ".join(case.subscriptions))
    return table


def summary_table(cases: list[Case]) -> Table:
    table = Table(title="Summary")
    for column in ("Document", "Expected", "Got", ""):
        table.add_column(column)
    for case in cases:
        expected = case.expected
        if case.expected == COMPLETED:
            expected += f" → {', '.join(sorted(case.expected_subscriptions))}"
        got = str(case.outcome)
        if case.outcome == COMPLETED:
            got += f" → {', '.join(sorted(case.subscriptions))}"
        table.add_row(case.title, expected, got, "[green]✓[/]" if case.as_expected else "[red]✗[/]")
    return table


def stage_timing_table(timings: list[StageTiming]) -> Table:
    """Per stage of intake and consumption: spans, median, p95 and max duration (from the host's spans)."""
    table = Table(title="Time per stage (ms)", caption="from the OpenTelemetry spans of these documents")
    table.add_column("Stage")
    for column in ("Spans", "Median", "p95", "Max"):
        table.add_column(column, justify="right")
    for timing in timings:
        table.add_row(
            timing.stage,
            str(timing.count),
            f"{timing.median_ms:.1f}",
            f"{timing.p95_ms:.1f}",
            f"{timing.max_ms:.1f}",
        )
    return table


def make_console(file: IO[str] | None = None) -> Console:
    """A console for the demo: the terminal's width on a terminal, NON_TERMINAL_WIDTH otherwise."""
    console = Console(file=file)
    return console if console.is_terminal else Console(file=file, width=NON_TERMINAL_WIDTH)


def print_tables(console: Console, cases: list[Case], timings: list[StageTiming] | None = None) -> None:
    """The final journey table (a terminal already shows the live one), the time per stage and the
    summary, spaced apart."""
    if not console.is_terminal:
        console.print()
        console.print(journey_table(cases, console.width))
    if timings:
        console.print()
        console.print(stage_timing_table(timings))
    console.print()
    console.print(summary_table(cases))
    console.print()
