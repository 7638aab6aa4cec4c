"""A Ctrl-C that lands while a child is being forked is not lost: Python ignores an exception raised
in an at-fork callback (the standard library's logging runs one after every fork), so the launchers'
SIGINT handler keeps it for raise_if_interrupted() instead of raising it into nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from local.stack import REPO_ROOT

# A Ctrl-C delivered inside an at-fork hook registered before local.processes, where logging's is.
_SCRIPT = """
import os, signal, subprocess, sys
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
from local.processes import die_with_parent, interrupt_handler, raise_if_interrupted
signal.signal(signal.SIGINT, interrupt_handler if sys.argv[1] == "ours" else signal.default_int_handler)
subprocess.Popen([sys.executable, "-c", "pass"], preexec_fn=die_with_parent()).wait()
try:
    raise_if_interrupted()
    print("lost")
except KeyboardInterrupt:
    print("raised")
"""


@pytest.mark.parametrize(("handler", "outcome"), [("ours", "raised"), ("default", "lost")])
def test_a_ctrl_c_during_a_fork_is_raised_afterwards(handler: str, outcome: str) -> None:
    """With Python's default handler the interrupt vanishes (the old launcher then served on after
    one Ctrl-C); with interrupt_handler it is raised right after the fork."""
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, handler],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert run.stdout.strip() == outcome, run.stderr
