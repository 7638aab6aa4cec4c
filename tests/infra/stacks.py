"""The dev and prod stacks, each run once offline under mocks and shared by the infra tests."""

from __future__ import annotations

from infra.program import deploy
from infra.stack_config import StackSettings, load_settings, read_stack_config
from tests.infra.pulumi_harness import ProgramRun, Registered, run_program

STACKS = ("dev", "prod")
Stack = tuple[StackSettings, ProgramRun]
_RUNS: dict[str, Stack] = {}


def stack_run(name: str) -> Stack:
    """One offline run per stack, shared by the tests (the program is deterministic)."""
    if name not in _RUNS:
        settings = load_settings(read_stack_config(name), name)
        _RUNS[name] = settings, run_program(lambda: deploy(settings), stack=name)
    return _RUNS[name]


def host_account(run: ProgramRun) -> Registered:
    """The Functions host's storage account (the other one holds payloads)."""
    return next(account for account in run.of_type("StorageAccount") if account.name.startswith("cchost"))
