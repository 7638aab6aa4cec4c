"""The dev and prod stacks, each run once offline under mocks and shared by the infra tests."""

from __future__ import annotations

from infra.program import deploy
from infra.stack_config import StackSettings, load_settings, read_stack_config
from tests.infra.pulumi_harness import ProgramRun, Registered, run_program

# "prod+producer" is prod's stack file plus one producer principal, one operator, one group grant and
# fewer consumed purposes, so these and the writer role stay covered although prod ships with none.
STACKS = ("dev", "prod", "prod+producer")
PRODUCER = {
    "name": "intake-service",
    "objectId": "3f2b8c1e-7d4a-4e6b-9c2f-1a5d8e7b6c4f",
    "tenants": ["acme", "acme-eu"],
    "classifications": ["internal", "confidential"],
}
OPERATOR = {"name": "oncall", "objectId": "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"}
GROUP_GRANT = {
    "name": "reviewers",
    "groupId": "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b",
    "tenants": ["globex"],
    "purposes": ["contract-review"],
}
CONSUMED_PURPOSES = ("contract-review", "evidence-archive")
Stack = tuple[StackSettings, ProgramRun]
_RUNS: dict[str, Stack] = {}


def stack_run(name: str) -> Stack:
    """One offline run per stack, shared by the tests (the program is deterministic)."""
    if name not in _RUNS:
        stack, _, variant = name.partition("+")
        config = read_stack_config(stack)
        if variant == "producer":
            config["producerPrincipals"] = [PRODUCER]
            config["operatorPrincipals"] = [OPERATOR]
            config["groupGrants"] = [GROUP_GRANT]
            config["consumedPurposes"] = list(CONSUMED_PURPOSES)
        settings = load_settings(config, stack)
        _RUNS[name] = settings, run_program(lambda: deploy(settings), stack=stack)
    return _RUNS[name]


def host_account(run: ProgramRun) -> Registered:
    """The Functions host's storage account (the other one holds payloads)."""
    return next(account for account in run.of_type("StorageAccount") if account.name.startswith("cchost"))


def payload_account(run: ProgramRun) -> Registered:
    """The payload storage account (containers, tables; the Functions host has its own)."""
    return next(account for account in run.of_type("StorageAccount") if not account.name.startswith("cchost"))
