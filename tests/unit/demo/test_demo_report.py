"""`make demo`'s pure helpers: host-log parsing, progress lines, consumer steps and the tables."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest
from claimcheck.outcome import DeadLetterReason
from rich.console import Console

from scripts.demo_cases import COMPLETED, CONTRACT_SUBSCRIPTIONS, Case, demo_cases
from scripts.demo_report import (
    HostLogEvent,
    consumer_steps,
    intake_text,
    journey_table,
    make_console,
    parse_host_log_line,
    print_tables,
    progress_line,
    result_brief,
    stop_step,
)

LOG_PREFIX = "2026-11-30 01:36:06,202 INFO "
RESULT = {
    "document_type": "contract",
    "obligations": 7,
    "parties": 2,
    "review_required": True,
    "priority": "normal",
}


def _case(**observed: Any) -> Case:
    case = Case(
        "Service agreement (text)", "service-agreement.txt", "acme", COMPLETED, CONTRACT_SUBSCRIPTIONS
    )
    return dataclasses.replace(case, **observed)


def test_completed_line_names_the_work_item_and_version() -> None:
    """The consumer's "completed" INFO line parses to its work item and version."""
    line = LOG_PREFIX + "claimcheck.consumer: completed wi-demo-7c4471d9e91c v1\n"
    assert parse_host_log_line(line) == HostLogEvent("completed", "wi-demo-7c4471d9e91c", "v1")


def test_cleanup_line_names_the_work_item_and_reason() -> None:
    """The cleaner's "payload removed" line parses to its work item and the reason given."""
    line = (
        LOG_PREFIX + "claimcheck.cleanup: payload removed: ref=ref_JzseAuMq work_item=wi-demo-9dd987df609c "
        "version=1 at=2026-11-30T01:36:06.467Z reason=sync cleanup after the effect was confirmed"
    )
    assert parse_host_log_line(line) == HostLogEvent(
        "cleanup", "wi-demo-9dd987df609c", "sync cleanup after the effect was confirmed"
    )


def test_retry_line_names_the_message() -> None:
    """The Function App's retry line parses to the message id and the wait with its reason."""
    line = LOG_PREFIX + "claimcheck.function_app: retrying message env-4bd0 in 1.5 s: unexpected OSError"
    assert parse_host_log_line(line) == HostLogEvent("retry", "env-4bd0", "in 1.5 s: unexpected OSError")


def test_other_lines_are_not_consumer_events() -> None:
    """Producer, dead-letter and host lines are not read as consumer step events."""
    for line in (
        LOG_PREFIX + "claimcheck.producer: accepted wi-demo-7c4471d9e91c v1 (inline)",
        LOG_PREFIX + "claimcheck.consumer: dead-letter integrity_failed: ETag differs (message env-1)",
        "Functions host ready on http://127.0.0.1:56803/api with: submit_document",
        "",
    ):
        assert parse_host_log_line(line) is None


def test_progress_line_has_time_document_stage_and_text() -> None:
    """A progress line starts with the elapsed seconds, then the document, the stage and the text."""
    line = progress_line(12.34, "service-agreement.txt", "intake", "202 inline v1")
    assert line.startswith("[ 12.3s] service-agreement.txt ")
    assert line.split()[3:] == ["intake", "202", "inline", "v1"]


def test_intake_text_says_transport_version_and_sha256_prefix() -> None:
    """The receipt reads as status, transport, version and the first 8 hex digits of the sha256."""
    receipt = {"transport": "reference", "version": 2, "sha256": "30ff2e6e704006f799f34e94"}
    assert intake_text(receipt) == "202 by reference v2 sha256 30ff2e6e…"
    assert intake_text({**receipt, "transport": "inline"}).startswith("202 inline v2")


def test_result_brief_shows_obligations_parties_review_and_priority() -> None:
    """The status API's result summary reads as counts, the review flag and the priority."""
    assert result_brief(RESULT) == "contract: 7 obligations, 2 parties, review required, priority normal"


def test_completed_reference_document_shows_every_step_in_order() -> None:
    """A completed document by reference shows the pipeline in order, ending with its cleanup."""
    case = _case(
        state=COMPLETED,
        transport="reference",
        consumer_completed=True,
        result=RESULT,
        payload_state="removed",
        cleanup="payload removed (sync cleanup)",
    )
    steps = consumer_steps(case)
    order = [
        "resolve",
        "authorize",
        "fetch + verify",
        "analyze",
        "result written",
        "event published",
        "cleanup",
    ]
    positions = [steps.index(step) for step in order]
    assert positions == sorted(positions)
    assert steps.endswith("cleanup: payload removed (sync cleanup)")


def test_inline_document_is_verified_inline_with_nothing_to_clean() -> None:
    """An inline document is verified from the envelope: no fetch, nothing stored to clean up."""
    steps = consumer_steps(_case(state=COMPLETED, transport="inline", payload_state="inline"))
    assert steps.startswith("verify inline")
    assert "fetch" not in steps
    assert steps.endswith("cleanup: nothing stored (inline)")


def test_dead_lettered_document_shows_where_it_stopped_and_why() -> None:
    """A dead-lettered document names its stopping step and description, and no later step."""
    case = _case(
        state="failed",
        payload_state="integrity_failed",
        outcome="integrity_failed",
        dead_letter_description="the stored object changed after it was registered (ETag differs)",
    )
    steps = consumer_steps(case)
    assert steps.startswith("✗ integrity_failed at fetch + verify: the stored object changed")
    assert steps.endswith("object kept (integrity_failed)")
    assert "analyze" not in steps


def test_unreported_progress_invents_no_steps() -> None:
    """Before the system reports anything about the consumer, no step is shown."""
    assert consumer_steps(_case(state="accepted")) == "…"
    assert consumer_steps(_case(state="running")) == "resolve → authorize → running…"


def test_every_dead_letter_reason_has_a_stopping_step() -> None:
    """Each reason the consumer can give maps to a pipeline step; an unknown one reads as "?"."""
    assert all(stop_step(reason.value) != "?" for reason in DeadLetterReason)
    assert stop_step("no_such_reason") == "?"


def test_without_a_terminal_tables_are_wide_and_apart() -> None:
    """Without a terminal: 160 columns, and a blank line between the journey and the summary."""
    cases = demo_cases()
    for case in cases:
        case.outcome, case.subscriptions = case.expected, tuple(sorted(case.expected_subscriptions))
    buffer = io.StringIO()
    console = make_console(buffer)
    print_tables(console, cases)
    lines = buffer.getvalue().splitlines()
    assert console.width == 160
    assert lines[1].strip() == "Claim-check journey"
    summary = [line.strip() for line in lines].index("Summary")
    assert lines[summary - 1] == ""
    assert lines[summary - 2].startswith("└")
    assert all(len(line) <= 160 for line in lines)


def test_summary_marks_only_documents_that_ended_as_expected() -> None:
    """A completed document routed to other subscriptions than expected is not as expected."""
    assert _case(outcome=COMPLETED, subscriptions=("audit", "contracts", "review")).as_expected
    assert not _case(outcome=COMPLETED, subscriptions=("audit",)).as_expected
    assert not _case(outcome="access_denied").as_expected


@pytest.mark.parametrize("width", [80, 120])
def test_the_live_journey_fits_a_small_terminal_and_never_cuts_the_subscriptions(width: int) -> None:
    """At 80x24 (and 120) the live table fits the screen: no cell cut ("Docume…"), every document's
    name and every subscription list whole on one line."""
    cases = demo_cases()
    for case in cases:
        case.outcome, case.subscriptions = case.expected, tuple(sorted(case.expected_subscriptions))
    cases[-1].outcome, cases[-1].state = None, "queued"  # one still under way
    console = Console(width=width, height=24, record=True, color_system=None)
    console.print(journey_table(cases, console.width))
    lines = console.export_text().splitlines()
    assert len(lines) <= 24
    assert all(len(line) <= width for line in lines)
    assert "…" not in "".join(lines)
    for case in cases:
        assert any(case.name in line for line in lines), case.name
        if case.subscriptions:
            assert any(", ".join(case.subscriptions) in line for line in lines), case.subscriptions
