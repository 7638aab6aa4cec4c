"""The ops CLI as deploy-stack.yml runs it: `python -m scripts.ops` from the repository root with only
requirements-ops.txt installed, so neither functions/ (the claimcheck package) nor the test tools are
on the path. Each case runs in a fresh interpreter whose path drops functions/."""

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


@pytest.mark.parametrize("command", ["deploy", "smoke"])
def test_commands_load_without_the_function_app_package(command: str) -> None:
    """`claimcheck-ops deploy|smoke --help` work with functions/ off the path."""
    result = _run(f"from scripts.ops import app; app(['{command}', '--help'], prog_name='claimcheck-ops')")
    assert result.returncode == 0, result.stderr
    assert "Usage: claimcheck-ops" in result.stdout


def test_an_azure_api_token_needs_no_local_identity_module() -> None:
    """The token for an Azure API comes from Entra ID without importing local.identity (which needs
    claimcheck); the claimcheck package is indeed absent in this interpreter."""
    result = _run(
        "import scripts.ops_token as t; t._entra_token = lambda audience: 'entra:' + audience; "
        "print(t.TokenSource(audience='api://claimcheck').token('https://app.azurewebsites.net/api')); "
        "import importlib.util; print(importlib.util.find_spec('claimcheck') is None)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["entra:api://claimcheck", "True"]
