"""The ops CLI as deploy-stack.yml runs it: `python -m scripts.ops` from the repository root with only
requirements-ops.txt installed, so neither the Makefile's .pth (functions/, the claimcheck package) nor
the test tools are there: scripts/__init__.py puts the checkout's functions/ on the path. Each case runs
in a fresh interpreter whose path drops functions/ first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
_WITHOUT_FUNCTIONS = (
    "import sys; sys.path[:] = [p for p in sys.path if not p.rstrip('/').endswith('functions')]; "
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_FUNCTIONS + code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["deploy", "smoke", "dlq replay"])
def test_commands_load_without_the_function_app_package(command: str) -> None:
    """`claimcheck-ops deploy|smoke|dlq replay --help` work with functions/ off the path."""
    words = command.split()
    result = _run(f"from scripts.ops import app; app([*{words!r}, '--help'], prog_name='claimcheck-ops')")
    assert result.returncode == 0, result.stderr
    assert "Usage: claimcheck-ops" in result.stdout


def test_an_azure_api_token_needs_no_local_identity_module() -> None:
    """The token for an Azure API comes from Entra ID without importing local.identity (the local
    issuer's client, for the local stack only)."""
    result = _run(
        "import scripts.ops_token as t; t._entra_token = lambda audience: 'entra:' + audience; "
        "print(t.TokenSource(audience='api://claimcheck').token('https://app.azurewebsites.net/api')); "
        "import sys; print('local.identity' in sys.modules)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["entra:api://claimcheck", "False"]


def test_the_cli_replays_with_the_function_apps_own_implementation() -> None:
    """One replay: `claimcheck-ops dlq replay` and the operator route both run the checkout's
    claimcheck.adapters.dead_letter_replay (no second copy of the algorithm in scripts/)."""
    result = _run(
        "import scripts.ops_servicebus as ops, claimcheck.adapters.dead_letter_queue as route; "
        "from claimcheck.adapters import dead_letter_replay as one; "
        "print(ops.replay_from is one.replay_from is route.replay_from, "
        "ops.ReplayResult is one.ReplayResult); "
        "print(one.__file__)"
    )
    assert result.returncode == 0, result.stderr
    same, file = result.stdout.split("\n")[:2]
    assert same.split() == ["True", "True"]
    assert Path(file) == REPO_ROOT / "functions" / "claimcheck" / "adapters" / "dead_letter_replay.py"
