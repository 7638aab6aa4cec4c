"""Fixtures of the workflow-step tests: a PATH whose `pulumi` is the stand-in in fake_pulumi.py."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass
class FakeCli:
    bin: Path
    home: Path

    def env(self, scenario: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
        """A clean environment: the stand-in first on PATH, this checkout importable, nothing inherited
        that a runner would not have (no Azure or GitHub variables of this machine)."""
        env = {
            "PATH": f"{self.bin}{os.pathsep}/usr/bin:/bin",
            "HOME": str(self.home),
            "PULUMI_HOME": str(self.home),
            "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'functions'}",
            "FAKE_PULUMI_SCENARIO": json.dumps(scenario or {}),
            "PULUMI_BACKEND_URL": "azblob://state?storage_account=stclaimcheck",
        }
        return env | extra

    def calls(self) -> list[list[str]]:
        path = self.home / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def fake_cli(tmp_path: Path) -> FakeCli:
    return make_fake_cli(tmp_path)


def make_fake_cli(tmp_path: Path) -> FakeCli:
    """`pulumi` (the stand-in) and `python`/`python3.11` (this interpreter) in a bin folder of their
    own."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    pulumi = bin_dir / "pulumi"
    pulumi.write_text(
        f"#!{sys.executable}\n" + (Path(__file__).parent / "fake_pulumi.py").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    pulumi.chmod(0o755)
    for name in ("python", "python3.11"):  # a wrapper, not a symlink: a venv is found by its path
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
        wrapper.chmod(0o755)
    return FakeCli(bin_dir, home)
