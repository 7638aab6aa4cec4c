"""Fixtures for the local Functions host tests: the sample app and its journals."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE_APP = Path(__file__).parent / "sample_app" / "function_app.py"


@pytest.fixture
def journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Files where the sample app's functions record what they saw (passed as app settings)."""
    paths = {"timer": tmp_path / "timer.jsonl", "bus": tmp_path / "bus.jsonl"}
    monkeypatch.setenv("SAMPLE_TIMER_JOURNAL", str(paths["timer"]))
    monkeypatch.setenv("SAMPLE_BUS_JOURNAL", str(paths["bus"]))
    return paths
