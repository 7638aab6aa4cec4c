"""`python -m local.stack` serves until Ctrl-C, then stops every process it started."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import requests

from local.stack import REPO_ROOT


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


def _wait_for(lines: queue.Queue[str], pattern: str, timeout: float = 90.0) -> str:
    while True:
        line = lines.get(timeout=timeout)
        if re.search(pattern, line):
            return line


def _launch(data: Path) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    launcher = subprocess.Popen(
        [sys.executable, "-m", "local.stack", "--port", "0", "--servicebus-port", "0", "--data", str(data)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(launcher.stdout, lines), daemon=True).start()
    return launcher, lines


def test_ctrl_c_stops_azurite_emulator_and_host(tmp_path: Path) -> None:
    """The launcher prints its endpoints, serves the API, and on SIGINT exits 0 leaving no child behind."""
    launcher, lines = _launch(tmp_path)
    try:
        api = _wait_for(lines, r"Functions API").split()[2]
        _wait_for(lines, r"Press Ctrl-C")
        children = psutil.Process(launcher.pid).children(recursive=True)
        assert len(children) >= 3
        assert requests.get(f"{api}/work-items/wi-none", timeout=30).status_code == 404
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=90) == 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def test_killed_launcher_leaves_no_azurite_emulator_or_host(tmp_path: Path) -> None:
    """Even a SIGKILLed launcher takes Azurite, the emulator and the Functions host down with it."""
    launcher, lines = _launch(tmp_path)
    _wait_for(lines, r"Press Ctrl-C")
    children = psutil.Process(launcher.pid).children(recursive=True)
    names = sorted(child.name() for child in children)
    assert sum("python" in name for name in names) == 2, names
    assert "node" in names, names
    launcher.kill()
    launcher.wait(timeout=30)
    try:
        _, alive = psutil.wait_procs(children, timeout=30)
        assert alive == []
    finally:
        for leftover in children:
            if leftover.is_running():
                leftover.kill()
