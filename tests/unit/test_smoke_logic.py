"""The smoke test's verdict logic with stand-ins for the API and the audit subscription (its real run
against the local stack is tests/e2e/test_smoke.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scripts.ops_errors import OpsError
from scripts.ops_smoke import result_event_matches, run_smoke, smoke_document


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _run(states: list[dict[str, Any]], audit: list[int | None], timeout_s: float = 30.0) -> Any:
    clock = FakeClock()
    submitted: list[bytes] = []

    def submit(document: bytes) -> dict[str, Any]:
        submitted.append(document)
        return {"work_item_id": "wi-1"}

    def status(work_item_id: str) -> dict[str, Any]:
        assert work_item_id == "wi-1"
        return states.pop(0) if len(states) > 1 else states[0]

    def find(work_item_id: str) -> int | None:
        return audit.pop(0) if len(audit) > 1 else audit[0]

    report = run_smoke(submit, status, find, timeout_s=timeout_s, poll_s=1.0, sleep=clock.sleep, clock=clock)
    assert len(submitted) == 1
    return report


def test_passes_when_completed_in_audit_and_payload_removed() -> None:
    """running -> completed, the event shows up on the second look, the payload is removed: a pass."""
    report = _run(
        [
            {"state": "running"},
            {"state": "completed", "payload_state": "processed"},
            {"state": "completed", "payload_state": "processed"},
            {"state": "completed", "payload_state": "removed"},
        ],
        [None, 42],
    )
    assert (report.work_item_id, report.audit_sequence_number) == ("wi-1", 42)
    assert report.payload_state == "removed"


def test_failed_work_item_ends_the_test_with_its_reason() -> None:
    """A dead-lettered work item fails the smoke test at once, naming the reason."""
    with pytest.raises(OpsError, match="ended failed: payload_missing"):
        _run([{"state": "failed", "failure_reason": "payload_missing"}], [None])


@pytest.mark.parametrize(
    ("states", "audit", "step"),
    [
        ([{"state": "running"}], [None], "waiting for the work item to complete"),
        (
            [{"state": "completed", "payload_state": "removed"}],
            [None],
            "result event in the audit subscription",
        ),
        ([{"state": "completed", "payload_state": "processed"}], [7], "payload was cleaned up"),
    ],
)
def test_each_wait_is_bounded_and_names_its_step(
    states: list[dict[str, Any]], audit: list[int | None], step: str
) -> None:
    """Whatever never happens, the test ends at the deadline with the step and the last thing seen."""
    with pytest.raises(OpsError, match=f"{step}: not done within 30 s"):
        _run(states, audit)


def test_result_event_matching_reads_the_summary() -> None:
    """Only a JSON body whose summary names the work item matches; anything else does not."""
    body = json.dumps({"summary": {"work_item_id": "wi-1"}, "result": {}}).encode()
    assert result_event_matches(body, "wi-1")
    assert not result_event_matches(body, "wi-2")
    assert not result_event_matches(b"\xff not json", "wi-1")
    assert not result_event_matches(b"[]", "wi-1")


def test_smoke_documents_differ_per_run_and_stay_small() -> None:
    """Each run's document is unique (no idempotent replay of an earlier run) and a few hundred bytes."""
    first, second = smoke_document("a"), smoke_document("b")
    assert first != second
    assert len(first) < 1024
