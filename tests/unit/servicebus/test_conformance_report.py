"""The conformance runner's side-by-side table: every step of either target, differences marked."""

from __future__ import annotations

from tests.integration.servicebus.conformance.__main__ import side_by_side


def test_steps_of_both_targets_are_listed_and_differences_counted() -> None:
    lines, differing = side_by_side(
        {
            "emulator": {"send": "passed", "sessions": "passed"},
            "azure": {"send": "passed", "sessions": "FAILED", "extra": "skipped"},
        }
    )
    assert lines == [
        "step      emulator  azure",
        "extra     missing   skipped  <- differs",
        "send      passed    passed",
        "sessions  passed    FAILED  <- differs",
    ]
    assert differing == 2
