"""Diagnostics and alerts the program declares, for the dev and prod stacks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infra.components.observability import (
    HTTP_SERVER_ERRORS_QUERY,
    ORPHAN_COUNT_PATTERN,
    ORPHAN_COUNT_QUERY,
    RECONCILER_SUMMARY_MESSAGE,
)
from tests.infra.pulumi_harness import ProgramRun
from tests.infra.stacks import Stack


def test_observability_covers_dead_letters_backlog_and_errors(stack: Stack) -> None:
    """Diagnostics go to the workspace; alerts on dead letters, backlog and errors reach the receivers."""
    settings, run = stack
    workspace = run.one("Workspace")
    assert workspace.inputs["retentionInDays"] == settings.log_retention_days
    diagnostics = run.of_type("DiagnosticSetting")
    assert len(diagnostics) == 3
    assert {d.inputs["workspaceId"] for d in diagnostics} == {workspace.id}
    assert any(d.inputs["resourceUri"].endswith("/blobServices/default") for d in diagnostics)
    metrics = {a.inputs["criteria"]["allOf"][0]["metricName"]: a.inputs for a in run.of_type("MetricAlert")}
    # The Function App's errors are a log alert (below): Flex Consumption emits no Http5xx metric.
    assert set(metrics) == {"DeadletteredMessages", "ActiveMessages", "ServerErrors"}
    assert metrics["ActiveMessages"]["criteria"]["allOf"][0]["threshold"] == settings.backlog_alert_threshold
    action_group = run.one("ActionGroup")
    assert all(a["actions"] == [{"actionGroupId": action_group.id}] for a in metrics.values())
    emails = [r["emailAddress"] for r in action_group.inputs.get("emailReceivers", [])]
    assert emails == list(settings.alert_emails)


def _log_alert(run: ProgramRun, display_name: str) -> dict[str, Any]:
    (rule,) = [r.inputs for r in run.of_type("ScheduledQueryRule") if r.inputs["displayName"] == display_name]
    return rule


def test_api_server_errors_alert_on_application_insights_requests(stack: Stack) -> None:
    """HTTP 5xx answers are counted from Application Insights requests over 15 minutes, split by
    function, and the description says what failing requests mean for callers."""
    settings, run = stack
    rule = _log_alert(run, "claimcheck: API server errors")
    assert rule["kind"] == "LogAlert"
    assert rule["scopes"] == [run.one("Component").id]
    assert rule["location"] == settings.location
    assert (rule["windowSize"], rule["evaluationFrequency"]) == ("PT15M", "PT5M")
    (condition,) = rule["criteria"]["allOf"]
    assert condition["query"] == HTTP_SERVER_ERRORS_QUERY
    assert (condition["timeAggregation"], condition["operator"], condition["threshold"]) == (
        "Count",
        "GreaterThan",
        0,
    )
    assert "metricMeasureColumn" not in condition
    assert condition["dimensions"] == [{"name": "name", "operator": "Include", "values": ["*"]}]
    assert rule["actions"] == {"actionGroups": [run.one("ActionGroup").id]}
    assert "callers are retrying or giving up" in rule["description"]


def test_server_errors_query_keeps_only_5xx_answers() -> None:
    """The query reads the host's request rows and keeps status codes of 500 and above."""
    assert HTTP_SERVER_ERRORS_QUERY.startswith("requests\n")
    assert "| where toint(resultCode) >= 500" in HTTP_SERVER_ERRORS_QUERY
    assert "name" in HTTP_SERVER_ERRORS_QUERY.rsplit("| project", 1)[1]  # the split-by column


def test_orphan_alert_queries_the_reconciler_summary_hourly(stack: Stack) -> None:
    """A log alert on Application Insights traces fires when a run in the last hour found orphans."""
    settings, run = stack
    rule = _log_alert(run, "claimcheck: orphaned payloads")
    assert rule["kind"] == "LogAlert"
    assert rule["scopes"] == [run.one("Component").id]
    assert rule["location"] == settings.location
    assert (rule["windowSize"], rule["evaluationFrequency"]) == ("PT1H", "PT15M")
    assert rule["enabled"] is True
    (condition,) = rule["criteria"]["allOf"]
    assert condition["query"] == ORPHAN_COUNT_QUERY
    assert condition["metricMeasureColumn"] == "orphans_found"
    assert (condition["timeAggregation"], condition["operator"], condition["threshold"]) == (
        "Maximum",
        "GreaterThan",
        0,
    )
    assert rule["actions"] == {"actionGroups": [run.one("ActionGroup").id]}
    description = rule["description"]
    assert "no worker received it" in description
    assert f"{settings.topology.lifecycle.provisional_grace_days} day(s)" in description


def test_orphan_query_reads_the_reconciler_summary_line() -> None:
    """The query keeps the reconciler's summary line, reads the count from its dimensions or message.

    The reconciler's side of this contract (message text, orphans_found dimension) is asserted in
    tests/integration/claimcheck/test_intake.py.
    """
    assert f'message startswith "{RECONCILER_SUMMARY_MESSAGE}"' in ORPHAN_COUNT_QUERY
    assert 'customDimensions["orphans_found"]' in ORPHAN_COUNT_QUERY
    assert f'extract(@"{ORPHAN_COUNT_PATTERN}", 1, message)' in ORPHAN_COUNT_QUERY


@pytest.mark.parametrize(
    ("message", "count"),
    [
        ("reconciliation finished orphans_found=3 orphans_removed=1 missing_flagged=0", "3"),
        ("reconciliation finished", None),
        ("reconciliation finished (past_due=False): ReconciliationReport(orphans_removed=['r1'])", None),
    ],
)
def test_orphan_count_pattern_reads_only_the_count(message: str, count: str | None) -> None:
    """The message fallback finds `orphans_found=N` and nothing in other summaries."""
    found = re.search(ORPHAN_COUNT_PATTERN, message)
    assert (found.group(1) if found else None) == count
