"""The README's "Try the dead-letter queue" walkthrough as written: its commands are read from the
README's code blocks and run in order with `claimcheck-ops` (plus --json, to read what they print)
against the running local stack, which the CLI finds by itself (running.json, as python -m
local.stack writes it); the placeholders are filled from earlier answers, and each `show` and
`dlq list` waits as a reader would until it shows what the README says."""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local.running import RunningStack
from local.stack import REPO_ROOT, TELEMETRY_DIR, LocalStack
from tests.integration.ops.cli import run_ops

from .journey import SAMPLES

DAMAGED = SAMPLES.parent / "dead-letter" / "damaged-contract.pdf"
README = REPO_ROOT / "README.md"
WAIT_SECONDS = 60.0


def readme_commands() -> list[list[str]]:
    """The `claimcheck-ops` commands of the README's walkthrough, in order (arguments after it)."""
    text = README.read_text(encoding="utf-8")
    start = text.index("### Try the dead-letter queue")
    end = re.compile(r"^#{1,3} ", re.M).search(text, start + 1)
    section = text[start : end.start() if end else len(text)]
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] in ("claimcheck-ops", "$ops"):
                commands.append(words[1:])
    return commands


@pytest.fixture
def env(stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What claimcheck-ops reads to find the stack by itself: this test session runs it."""
    monkeypatch.chdir(REPO_ROOT)  # the README's paths are relative to the repository
    RunningStack(
        pid=os.getpid(),
        api=stack.api_url,
        token_issuer=stack.minter.issuer,
        servicebus=stack.servicebus_connection_string,
        servicebus_management=stack.servicebus_management_connection_string,
        storage=stack.storage_connection_string,
        telemetry_dir=str(stack.work_dir / TELEMETRY_DIR),
    ).write(tmp_path)
    return {"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path)}


@pytest.fixture
def ops(env: dict[str, str]) -> Callable[..., Any]:
    """`claimcheck-ops ARGS --json`: the parsed output."""

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
    commands = readme_commands()
    assert [command[:2] for command in commands] == [
        ["send", "samples/dead-letter/damaged-contract.pdf"],
        ["show", "<work-item-id>"],
        ["dlq", "list"],
        ["dlq", "show"],
        ["dlq", "replay"],
        ["dlq", "list"],
        ["send", "samples/contracts/supply-agreement.pdf"],
        ["show", "<work-item-id>"],
    ]
    work_item, sequence, seen = "", "", set()

    def run(command: list[str]) -> Any:
        filled = [word.replace("<work-item-id>", work_item).replace("<sequence-number>", sequence)
                  for word in command]  # fmt: skip
        return ops(*filled)

    def listed() -> list[dict[str, Any]]:
        return [m for m in run(commands[2]) if m["session_id"] == work_item]

    work_item = run(commands[0])["work_item_id"]
    failed = _until("state failed", lambda: (view := run(commands[1]))["state"] == "failed" and view)
    assert failed["failure_reason"] == "processing_failed"
    (first,) = _until("its dead-lettered message", listed)
    assert first["dead_letter_reason"] == "processing_failed"
    sequence = str(first["sequence_number"])
    seen.add(first["sequence_number"])
    assert run(commands[3])["application_properties"]["tenant"] == "acme"
    (replayed,) = run(commands[4])
    assert replayed["status"] == "replayed"
    # The copy fails the same way: one new entry, the old one gone.
    (again,) = _until(
        "the copy dead-lettered", lambda: [m for m in listed() if m["sequence_number"] not in seen]
    )
    assert [m["sequence_number"] for m in listed()] == [again["sequence_number"]]
    assert run(commands[6])["receipt"]["version"] == 2
    done = _until("completed", lambda: (view := run(commands[7]))["state"] == "completed" and view)
    assert done["version"] == 2


def test_revoke_locally_turns_a_replay_into_access_denied(
    ops: Callable[..., Any], env: dict[str, str], tmp_path: Path
) -> None:
    """The README's local revoke: a dead-lettered document's object is kept readable for a replay;
    revoked, the replayed copy dead-letters access_denied. A processed object cannot be revoked, and
    the error says so (with its payload state), not "no longer readable"."""
    # Over the inline threshold, so stored by reference (a small document travels in its message).
    damaged = tmp_path / "documents" / "damaged-large.pdf"
    damaged.parent.mkdir()
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
    (dead,) = ops("dlq", "list", "documents", "--work-item", work_item)
    ops("dlq", "replay", "documents", str(dead["sequence_number"]))
    (denied,) = _until(
        "the replayed copy dead-lettered access_denied",
        lambda: [
            m for m in ops("dlq", "list", "documents", "--work-item", work_item)
            if m["dead_letter_reason"] == "access_denied"
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
