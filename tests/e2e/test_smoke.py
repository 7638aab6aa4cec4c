"""`claimcheck-ops smoke` against the running local stack: the same command CI runs after a deployment."""

from __future__ import annotations

from typer.testing import CliRunner

from local.stack import LocalStack
from scripts.ops import app


def _smoke(stack: LocalStack, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app,
        [
            "smoke",
            "--api",
            stack.api_url,
            "--timeout",
            "240",
            "--token-issuer",
            stack.minter.issuer,
            *extra,
        ],
    )
    return result.exit_code, result.stdout, result.stderr


def test_smoke_passes_on_a_working_stack(stack: LocalStack) -> None:
    """Through the API only (no Service Bus connection string given): submit, completed, the stored
    result of that version, payload removed: exit code 0."""
    code, out, err = _smoke(stack)
    assert code == 0, err
    assert "smoke test passed" in out
    assert "payload removed" in out
    assert "SERVICE AGREEMENT" not in out + err  # never the document's bytes


def test_smoke_fails_with_one_error_line(stack: LocalStack) -> None:
    """A tenant the caller is not granted (the API answers 403) is a failed smoke test: exit code 1,
    one error line."""
    code, _, err = _smoke(stack, "--tenant", "not-granted")
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith("error: smoke test failed")
