"""The smoke test's verdict logic with stand-ins for the API's three routes (its real run against the
local stack is tests/e2e/test_smoke.py). Only the HTTP API is consulted: nothing here, or in the
command, opens a Service Bus connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scripts import ops_smoke
from scripts.ops_errors import OpsError
from scripts.ops_smoke import result_problem, run_smoke, smoke_document


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


ROUTING = {"document_type": "contract", "priority": "normal", "review_required": False}
GOOD_RESULT = {
    "work_item_id": "wi-1",
    "version": 1,
    "summary": {"parties": 2, **ROUTING},
    "result": {"parties": []},
}


def _run(
    states: list[dict[str, Any]],
    result: tuple[int, dict[str, Any]] = (200, GOOD_RESULT),
    timeout_s: float = 30.0,
) -> Any:
    clock = FakeClock()
    submitted: list[bytes] = []
    asked: list[tuple[str, int]] = []

    def submit(document: bytes) -> dict[str, Any]:
        submitted.append(document)
        return {"work_item_id": "wi-1"}

    def status(work_item_id: str) -> dict[str, Any]:
        assert work_item_id == "wi-1"
        return states.pop(0) if len(states) > 1 else states[0]

    def read_result(work_item_id: str, version: int) -> tuple[int, dict[str, Any]]:
        asked.append((work_item_id, version))
        return result

    report = run_smoke(
        submit, status, read_result, timeout_s=timeout_s, poll_s=1.0, sleep=clock.sleep, clock=clock
    )
    assert len(submitted) == 1
    assert asked == [("wi-1", 1)]
    return report


def test_passes_when_completed_with_its_result_and_payload_removed() -> None:
    """running -> completed (version 1), its result is stored, the payload is removed: a pass."""
    report = _run(
        [
            {"state": "running", "version": 0},
            {"state": "completed", "version": 1, "payload_state": "processed"},
            {"state": "completed", "version": 1, "payload_state": "processed"},
            {"state": "completed", "version": 1, "payload_state": "removed"},
        ]
    )
    assert (report.work_item_id, report.version, report.payload_state) == ("wi-1", 1, "removed")


def test_failed_work_item_ends_the_test_with_its_reason() -> None:
    """A dead-lettered work item fails the smoke test at once, naming the reason."""
    with pytest.raises(OpsError, match="ended failed: payload_missing"):
        _run([{"state": "failed", "failure_reason": "payload_missing"}])


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ((404, {"error": "no_result"}), "HTTP 404 no_result"),
        ((200, GOOD_RESULT | {"work_item_id": "wi-2"}), "names work item 'wi-2'"),
        ((200, GOOD_RESULT | {"version": 2}), "of version 2, not 1"),
        ((200, GOOD_RESULT | {"result": {}}), "holds no analysis"),
    ],
)
def test_a_completed_work_item_without_its_result_fails(
    result: tuple[int, dict[str, Any]], says: str
) -> None:
    """Completed is not enough: the API must hold this work item's analysis of that version."""
    with pytest.raises(OpsError, match=says):
        _run([{"state": "completed", "version": 1, "payload_state": "removed"}], result)


@pytest.mark.parametrize(
    ("states", "step"),
    [
        ([{"state": "running"}], "waiting for the work item to complete"),
        ([{"state": "completed", "version": 1, "payload_state": "processed"}], "payload was cleaned up"),
    ],
)
def test_each_wait_is_bounded_and_names_its_step(states: list[dict[str, Any]], step: str) -> None:
    """Whatever never happens, the test ends at the deadline with the step and the last thing seen."""
    with pytest.raises(OpsError, match=f"{step}: not done within 30 s"):
        _run(states)


def test_the_smoke_test_needs_no_service_bus() -> None:
    """The module (and the command, scripts/ops_release.py) reach the stack through the API only:
    neither imports the Service Bus SDK or the ops CLI's Service Bus helpers."""
    import scripts.ops_release as release

    for module in (ops_smoke, release):
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        assert "servicebus" not in source.lower().replace("service bus", "")


def test_result_problem_accepts_only_the_work_items_analysis() -> None:
    assert result_problem(GOOD_RESULT, "wi-1", 1) is None
    assert result_problem({}, "wi-1", 1) is not None


@pytest.mark.parametrize(
    ("summary", "named"),
    [
        (None, "summary"),
        ({**ROUTING, "document_type": ""}, "document_type"),
        ({**ROUTING, "priority": "urgent"}, "priority"),
        ({key: value for key, value in ROUTING.items() if key != "review_required"}, "review_required"),
    ],
)
def test_result_problem_needs_the_result_events_routing_values(summary: object, named: str) -> None:
    """The routing values the result event carries as properties (what subscriptions filter on)."""
    problem = result_problem({**GOOD_RESULT, "summary": summary}, "wi-1", 1)
    assert problem is not None
    assert named in problem


def test_smoke_documents_differ_per_run_and_stay_small() -> None:
    """Each run's document is unique (no idempotent replay of an earlier run) and a few hundred bytes."""
    first, second = smoke_document("a"), smoke_document("b")
    assert first != second
    assert len(first) < 1024
