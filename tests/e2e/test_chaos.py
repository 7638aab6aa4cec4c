"""The short chaos run (scripts/chaos.py, `make chaos` in full): documents across tenants while the
host and the emulator are SIGKILLed and restarted and Azurite is frozen; nothing lost or duplicated."""

from __future__ import annotations

import io

from scripts.chaos import COMPONENTS, Options, run, schedule


def test_the_seeded_schedule_hits_every_component() -> None:
    plan = schedule(Options(seed=3, faults=3, duration=30))
    assert sorted(fault.component for fault in plan) == sorted(COMPONENTS)
    assert plan == schedule(Options(seed=3, faults=3, duration=30))  # same seed, same run
    assert all(0 < fault.at < 30 for fault in plan)


def test_short_chaos_run_loses_and_duplicates_nothing() -> None:
    report = io.StringIO()
    result = run(Options(seed=7, documents=12, poison=2, duration=25, faults=3, settle=240), out=report)
    print(report.getvalue())
    assert sum(result.faults.values()) == 3
    assert result.accepted == 12
    assert result.ok, report.getvalue()
    assert result.completed_once == result.accepted
    assert result.dead_intended == 2
