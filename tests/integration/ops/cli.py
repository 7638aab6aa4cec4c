"""Run `claimcheck-ops` in-process, as an operator would from a shell."""

from __future__ import annotations

from collections.abc import Mapping

from typer.testing import CliRunner, Result

from scripts.ops import app, main

# Wide enough that rich never folds a message id or a reason across lines.
_ENV = {"COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb"}


def run_ops(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """Invoke the CLI with `args`; the environment starts without any CLAIMCHECK_* setting."""
    environment: dict[str, str | None] = {
        "CLAIMCHECK_SERVICEBUS_CONNECTION": None,
        "CLAIMCHECK_SERVICEBUS_NAMESPACE": None,
        "CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION": None,
        "CLAIMCHECK_API": None,
        "CLAIMCHECK_API_KEY": None,
        "CLAIMCHECK_API_AUDIENCE": None,
        "CLAIMCHECK_CLIENT_ID": None,
        "CLAIMCHECK_STORAGE_CONNECTION": None,
        "CLAIMCHECK_TELEMETRY_DIR": None,
        # No developer's running local stack (.local-stack/running.json) stands in for what a test omits.
        "CLAIMCHECK_LOCAL_STACK_DIR": "/nonexistent/claimcheck-local-stack",
    }
    environment |= _ENV
    environment |= dict(env or {})
    return CliRunner().invoke(app, list(args), env=environment)


def run_main(*args: str) -> int:
    """Call the console-script entry point (usage errors are handled there, not in `app`)."""
    return main(list(args))
