"""The README's "Try the dead-letter queue" walkthrough, command by command, with `claimcheck-ops`
against the running local stack: send a damaged PDF, see it dead-lettered, show and replay it, then
fix it with a new version of the same work item (`send --work-item-id <id> --new-version`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
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


def test_revoke_locally_turns_a_replay_into_access_denied(
    stack: LocalStack, ops: Callable[..., Any], tmp_path: Path
) -> None:
    """The README's local revoke: a dead-lettered document's object is kept readable for a replay;
    revoked, the replayed copy dead-letters access_denied. A processed object cannot be revoked, and
    the error says so (with its payload state), not "no longer readable"."""
    env = {"CLAIMCHECK_STORAGE_CONNECTION": stack.storage_connection_string}
    # Over the inline threshold, so stored by reference (a small document travels in its message).
    damaged = tmp_path / "damaged-large.pdf"
    damaged.write_bytes(DAMAGED.read_bytes() + b"%" * 64 * 1024)
    sent = ops(
        "send", str(damaged), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal",
    )  # fmt: skip
    work_item = sent["work_item_id"]
    _until("state failed", lambda: ops("show", work_item)["state"] == "failed")
    revoked = run_ops("revoke", work_item, "--reason", "INC-7", env=env)
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.stdout)["revoked"] is True
    (dead,) = [m for m in ops("dlq", "list", "documents") if m["session_id"] == work_item]
    ops("dlq", "replay", "documents", str(dead["sequence_number"]))
    (denied,) = _until(
        "the replayed copy dead-lettered access_denied",
        lambda: [
            m for m in ops("dlq", "list", "documents")
            if m["session_id"] == work_item and m["dead_letter_reason"] == "access_denied"
        ],
    )  # fmt: skip
    assert denied["sequence_number"] != dead["sequence_number"]

    evidence = ops(
        "send", str(SAMPLES / "master-agreement-large.txt"), "--tenant", "acme",
        "--purpose", "evidence-archive", "--classification", "internal",
    )  # fmt: skip
    kept = evidence["work_item_id"]
    _until("completed", lambda: ops("show", kept)["state"] == "completed")
    refused = run_ops("revoke", kept, "--reason", "INC-8", env=env)
    assert refused.exit_code == 1
    # (main() prints it as one `error:` line; the in-process runner keeps the OpsError.)
    assert "its object was processed" in str(refused.exception)
