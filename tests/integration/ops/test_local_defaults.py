"""The running local stack as claimcheck-ops's defaults (running.json, written by python -m local.stack),
`claimcheck-ops env`, and `python -m local.stack --reset` (make reset)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from local.running import RUNNING_FILE, RunningStack
from local.stack import reset
from tests.integration.ops.cli import run_ops


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _running(folder: Path, servicebus: str, pid: int | None = None) -> RunningStack:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Config.json").write_text("{}")
    stack = RunningStack(
        pid=os.getpid() if pid is None else pid,
        api="http://127.0.0.1:7071/api",
        token_issuer="http://127.0.0.1:7090/tenant/v2.0",
        servicebus=servicebus,
        servicebus_management=servicebus.replace(":5672", ":5300"),
        storage="UseDevelopmentStorage=true",
        telemetry_dir=str(folder / "telemetry"),
    )
    stack.write(folder)
    return stack


def test_a_bus_command_without_options_uses_the_running_stack(
    tmp_path: Path, servicebus_connection: str
) -> None:
    """`peek documents` with no --connection-string, no --namespace: the stack's emulator."""
    _running(tmp_path, servicebus_connection)
    result = run_ops("peek", "documents", "--json", env={"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), list)


def test_an_explicit_connection_string_wins_over_the_running_stack(tmp_path: Path) -> None:
    _running(
        tmp_path,
        "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true",
    )
    result = run_ops(
        "peek", "documents", "--connection-string", "not a connection string",
        env={"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.exit_code == 1
    assert "is not a Service Bus connection string" in result.stderr


def test_env_prints_exports_a_shell_reads_back(tmp_path: Path) -> None:
    stack = _running(tmp_path, "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;")
    result = run_ops("env", env={"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    exported = dict(shlex.split(line)[1].split("=", 1) for line in result.stdout.splitlines())
    assert exported["CLAIMCHECK_SERVICEBUS_CONNECTION"] == stack.servicebus
    assert exported["CLAIMCHECK_STORAGE_CONNECTION"] == stack.storage
    assert exported["CLAIMCHECK_TOKEN_ISSUER"] == stack.token_issuer
    assert exported["CLAIMCHECK_TELEMETRY_DIR"] == stack.telemetry_dir


def test_a_killed_launchers_file_is_named_stale_not_used(tmp_path: Path) -> None:
    _running(tmp_path, "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;", _dead_pid())
    env = {"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path)}
    listed = run_ops("env", env=env)
    assert listed.exit_code == 1
    assert "no local stack is running" in listed.stderr
    assert "which is not running" in listed.stderr
    peeked = run_ops("peek", "documents", env=env)
    assert peeked.exit_code == 1
    assert "start the local stack (python -m local.stack)" in peeked.stderr


def test_without_a_stack_env_says_how_to_start_one() -> None:
    result = run_ops("env")
    assert result.exit_code == 1
    assert "python -m local.stack" in result.stderr


def test_reset_refuses_while_a_stack_runs_from_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _running(tmp_path / "data", "sb")
    assert reset(tmp_path / "data") == 1
    assert "stop it first" in capsys.readouterr().err
    assert (tmp_path / "data" / RUNNING_FILE).exists()


def test_reset_deletes_a_stopped_stacks_folder_and_keeps_any_other(tmp_path: Path) -> None:
    _running(tmp_path / "data", "sb", _dead_pid())  # left by a killed launcher
    (tmp_path / "data" / "servicebus").mkdir()
    assert reset(tmp_path / "data") == 0
    assert not (tmp_path / "data").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("keep")
    assert reset(tmp_path / "other") == 1
    assert (tmp_path / "other" / "precious.txt").exists()


def test_show_without_api_calls_the_running_stacks_api(tmp_path: Path, token_issuer: str) -> None:
    """The stack on other ports (--port 0): show without --api reaches its API, with its issuer."""
    from tests.integration.ops.api_stub import running_api_stub

    with running_api_stub() as api:
        api.answers[("GET", "/api/work-items/wi-42")] = (200, {"work_item_id": "wi-42", "state": "completed"})
        stack = _running(tmp_path, "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;")
        moved = RunningStack(**{**asdict(stack), "api": api.base_url, "token_issuer": token_issuer})
        moved.write(tmp_path)
        result = run_ops(
            "show", "wi-42", env={"CLAIMCHECK_LOCAL_STACK_DIR": str(tmp_path), "CLAIMCHECK_TOKEN_ISSUER": ""}
        )
    assert result.exit_code == 0, result.output
    assert [request.path for request in api.requests] == ["/api/work-items/wi-42"]
