"""Every `claimcheck-ops` view rendered by Rich's own console at 80 and 120 columns: nothing wider than
the console, every id whole on one line, every reason and description present (wrapped at spaces)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from claimcheck.telemetry import DEAD_LETTER_REASON, OUTCOME, PAYLOAD_VERSION
from rich.console import Console

from scripts.ops_output import (
    ACTIVE_COLUMNS,
    DEAD_LETTER_COLUMNS,
    STATS_COLUMNS,
    print_messages,
    print_record,
    print_table,
)
from scripts.ops_servicebus import MessageSummary
from scripts.ops_trace import print_timeline
from scripts.telemetry_files import SpanRecord, TimelineRow

WIDTHS = (80, 120)
WORK_ITEM = "wi-3f9a1c0e5b7d4e2a9c8b6d4f2e0a1b3c"
MESSAGE_ID = "env-5d2f1e0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e"
CORRELATION = "req-0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
DESCRIPTION = "the analyzer cannot process this document: unreadable PDF (PdfReadError)"
REPLAY_ID = f"{MESSAGE_ID}.replay.1234"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _console(width: int) -> Console:
    return Console(width=width, record=True, color_system=None, force_terminal=False)


def _lines(console: Console) -> list[str]:
    return console.export_text().splitlines()


def _assert_fits(lines: list[str], width: int) -> None:
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, too_wide


def _assert_whole(lines: list[str], *values: str) -> None:
    """Each value on one line, unbroken (a folded id is split over two lines)."""
    for value in values:
        assert any(value in line for line in lines), (value, lines)


def _assert_present(lines: list[str], *texts: str) -> None:
    """Each text present, possibly wrapped at spaces (and never cut with an ellipsis)."""
    joined = " ".join(" ".join(lines).split())
    for text in texts:
        assert text in joined, (text, joined)
    assert "…" not in joined


def _message(sequence: int, **fields: object) -> MessageSummary:
    values: dict[str, object] = {
        "sequence_number": sequence,
        "message_id": MESSAGE_ID,
        "session_id": WORK_ITEM,
        "correlation_id": CORRELATION,
        "enqueued_time": datetime(2026, 12, 2, 4, 50, 29, tzinfo=UTC),
        "delivery_count": 1,
        "state": "active",
        "subject": "claimcheck.document",
        "content_type": "application/json",
        "dead_letter_reason": None,
        "dead_letter_description": None,
    }
    return MessageSummary(**(values | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("width", WIDTHS)
def test_dlq_list_keeps_ids_whole_and_the_description_present(width: int) -> None:
    console = _console(width)
    messages = [
        _message(
            sequence,
            state="deferred" if sequence == 1 else "active",
            dead_letter_reason="processing_failed",
            dead_letter_description=DESCRIPTION,
        )
        for sequence in (1, 1234)
    ]
    print_messages(
        "Dead-lettered messages in documents", messages, False, DEAD_LETTER_COLUMNS, console=console
    )
    lines = _lines(console)
    _assert_fits(lines, width)
    _assert_whole(lines, MESSAGE_ID, WORK_ITEM, "processing_failed", "1234")
    _assert_present(lines, DESCRIPTION)
    # No column squeezed to a character a line (the old rendering ran the reason down 70 rows).
    assert len(lines) < 40


@pytest.mark.parametrize("width", WIDTHS)
def test_peek_keeps_message_session_and_correlation_ids_whole(width: int) -> None:
    console = _console(width)
    print_messages(
        "Active messages in results/subscriptions/audit", [_message(7), _message(8)], False, ACTIVE_COLUMNS,
        console=console,
    )  # fmt: skip
    lines = _lines(console)
    _assert_fits(lines, width)
    _assert_whole(lines, MESSAGE_ID, WORK_ITEM, CORRELATION, "2026-12-02T04:50:29Z")


def _span(name: str, start_ms: float, span_id: str, **attributes: object) -> SpanRecord:
    start = int(start_ms * 1e6)
    return SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id=span_id,
        parent_id=None,
        name=name,
        start_ns=start,
        end_ns=start + 12_345_678,
        attributes=attributes,
        links=(),
        status="",
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_trace_keeps_stage_names_on_one_line(width: int) -> None:
    console = _console(width)
    rows = [
        TimelineRow(_span("claimcheck intake", 0, "a1", **{PAYLOAD_VERSION: 1}), 0, 0.0),
        TimelineRow(_span("upload", 1.5, "a2"), 1, 1.5),
        TimelineRow(
            _span(
                "claimcheck consume",
                40.2,
                "b1",
                **{OUTCOME: "dead_lettered", DEAD_LETTER_REASON: "processing_failed"},
            ),
            0,
            40.2,
            ["claimcheck intake"],
        ),
        TimelineRow(_span("result_publish", 45.0, "b2"), 1, 45.0),
    ]
    print_timeline(WORK_ITEM, rows, console)
    lines = _lines(console)
    _assert_fits(lines, width)
    _assert_whole(lines, WORK_ITEM, "claimcheck intake", "claimcheck consume", "result_publish")
    _assert_present(lines, "dead_lettered: processing_failed")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_record_keeps_long_values_whole(width: int) -> None:
    console = _console(width)
    record = {
        "sequence_number": 1234,
        "message_id": REPLAY_ID,
        "dead_letter_description": DESCRIPTION,
        "application_properties": {"traceparent": TRACEPARENT, "work_item_id": WORK_ITEM},
    }
    print_record(f"Dead-lettered message 1234 of documents [{WORK_ITEM}]", record, False, console=console)
    lines = _lines(console)
    _assert_fits(lines, width)
    # The title's brackets are text, not markup Rich would swallow.
    _assert_whole(lines, f"[{WORK_ITEM}]", REPLAY_ID, TRACEPARENT, "application_properties.traceparent")
    _assert_present(lines, DESCRIPTION)


@pytest.mark.parametrize("width", WIDTHS)
def test_stats_and_replay_tables_fit(width: int) -> None:
    console = _console(width)
    counts = [
        {"entity": "results/subscriptions/notifications", "active": 3, "dead_letter": 0, "scheduled": None,
         "detail": "subscription"},
        {"entity": "documents", "active": 12, "dead_letter": 2, "scheduled": 0, "detail": "queue"},
    ]  # fmt: skip
    print_table("Message counts", counts, STATS_COLUMNS, console=console)
    replayed = [
        {"sequence_number": 1234, "status": "replayed", "original_message_id": MESSAGE_ID,
         "replay_message_id": REPLAY_ID, "detail": "copy sent, dead-lettered message completed"},
    ]  # fmt: skip
    print_table("Replay from the dead-letter queue of documents", replayed, ["sequence_number", "status",
                "original_message_id", "replay_message_id", "detail"], console=console)  # fmt: skip
    lines = _lines(console)
    _assert_fits(lines, width)
    _assert_whole(lines, "results/subscriptions/notifications", MESSAGE_ID, REPLAY_ID)


def test_a_wide_console_shows_a_table_and_a_narrow_one_records() -> None:
    wide, narrow = _console(200), _console(80)
    messages = [_message(5, dead_letter_reason="expired", dead_letter_description="ttl")]
    for console in (wide, narrow):
        print_messages("DLQ", messages, False, DEAD_LETTER_COLUMNS, console=console)
    # A table has one header line naming the columns; records name each field on its own line.
    assert any("seq" in line and "reason" in line and "deliveries" in line for line in _lines(wide))
    assert any(line.startswith("reason") and "expired" in line for line in _lines(narrow))
