"""The README's "Try the dead-letter queue" walkthrough, command by command, with `claimcheck-ops`
against the running local stack: send a damaged PDF, see it dead-lettered, show and replay it, then
fix it with a new version of the same work item (`send --work-item-id <id> --new-version`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from local.stack import LocalStack
from tests.integration.ops.cli import run_ops

from .journey import SAMPLES

DAMAGED = SAMPLES.parent / "dead-letter" / "damaged-contract.pdf"
FIX = SAMPLES / "supply-agreement.pdf"
WAIT_SECONDS = 60.0


@pytest.fixture
def ops(stack: LocalStack) -> Callable[..., Any]:
    """`claimcheck-ops ARGS --json` with the two exports the README asks for; the parsed output."""
    env = {
        "CLAIMCHECK_SERVICEBUS_CONNECTION": stack.servicebus_connection_string,
        "CLAIMCHECK_API": stack.api_url,
        "CLAIMCHECK_TOKEN_ISSUER": stack.minter.issuer,
    }

    def run(*args: str) -> Any:
        result = run_ops(*args, "--json", env=env)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return run


def _until(what: str, probe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"not within {WAIT_SECONDS:.0f} s: {what}")


def test_the_dead_letter_walkthrough_works_as_written(ops: Callable[..., Any]) -> None:
    sent = ops(
        "send", str(DAMAGED), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal",
    )  # fmt: skip
    work_item = sent["work_item_id"]
    failed = _until("state failed", lambda: (view := ops("show", work_item))["state"] == "failed" and view)
    assert failed["failure_reason"] == "processing_failed"

    def dead_letters() -> list[dict[str, Any]]:
        return [m for m in ops("dlq", "list", "documents") if m["session_id"] == work_item]

    (first,) = _until("its dead-lettered message", dead_letters)
    assert first["dead_letter_reason"] == "processing_failed"
    shown = ops("dlq", "show", "documents", str(first["sequence_number"]))
    assert shown["application_properties"]["tenant"] == "acme"
    (replayed,) = ops("dlq", "replay", "documents", str(first["sequence_number"]))
    assert replayed["status"] == "replayed"
    # The copy fails the same way: one new entry, the old one gone.
    (again,) = _until(
        "the replayed copy dead-lettered",
        lambda: [m for m in dead_letters() if m["sequence_number"] != first["sequence_number"]],
    )
    assert [m["sequence_number"] for m in dead_letters()] == [again["sequence_number"]]

    fixed = ops(
        "send", str(FIX), "--tenant", "acme", "--purpose", "contract-review", "--classification", "internal",
        "--content-type", "application/pdf", "--work-item-id", work_item, "--new-version",
    )  # fmt: skip
    assert fixed["receipt"]["version"] == 2
    done = _until(
        "completed at version 2", lambda: (v := ops("show", work_item))["state"] == "completed" and v
    )
    assert done["version"] == 2
