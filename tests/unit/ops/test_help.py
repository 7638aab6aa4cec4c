"""`claimcheck-ops --help` and each command's help at 80 columns: placeholders kept (Rich markup and
Markdown would eat `<host>` and `[NAME]`), named metavars (never `<str>`/`<bool>`), every option and
argument described, every line within 80 columns; and usage errors that name the argument."""

from __future__ import annotations

import re
from typing import Any

import pytest

from scripts.ops import _cli, main

COMMANDS = [
    [], ["send"], ["show"], ["peek"], ["stats"], ["deploy"], ["smoke"], ["reconcile"], ["revoke"],
    ["trace"], ["env"], ["dlq"], ["dlq", "list"], ["dlq", "show"], ["dlq", "replay"],
]  # fmt: skip


def _help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*command, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: " ".join(command) or "top")
def test_help_fits_80_columns_with_named_placeholders(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _help(capsys, monkeypatch, *command)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert not re.search(r"<(str|bool|int|float|path)>", text), text


def test_placeholders_survive_in_option_help(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = " ".join(_help(capsys, monkeypatch, "send").split())
    assert "(https://<host>/api)" in text
    assert "<audience>/.default" in text
    assert "--tenant TENANT" in text


def _commands(command: Any) -> list[Any]:
    found, pending = [], [command]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(getattr(current, "commands", {}).values())
    return found


def test_every_option_and_argument_is_described() -> None:
    undescribed = [
        f"{command.name} {param.name}"
        for command in _commands(_cli())
        for param in command.params
        if not (getattr(param, "help", None) or "").strip()
    ]
    assert undescribed == []


def test_a_bad_argument_is_named_as_the_help_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dlq", "show", "documents", "abc"]) == 2
    assert "Invalid value for 'SEQUENCE_NUMBER'" in capsys.readouterr().err


def test_the_stack_launchers_help_is_for_its_user() -> None:
    """`python -m local.stack --help`: what it runs and how to use it, not the module's developer notes
    (start_stack, LocalStack.kill), within 80 columns."""
    import subprocess
    import sys

    from local.stack import REPO_ROOT

    shown = subprocess.run(
        [sys.executable, "-m", "local.stack", "--help"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "Run the whole claim-check stack on this machine" in shown.stdout
    assert "--reset" in shown.stdout
    assert "start_stack" not in shown.stdout
    assert all(len(line) <= 80 for line in shown.stdout.splitlines()), shown.stdout
