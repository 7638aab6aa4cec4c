"""scripts/bootstrap_ci.py: the CI identities' planned roles per identity, and an idempotent,
fork-safe run against a stand-in `az` (tests/unit/azure_cli_standin.py) as strict as the real one."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.roles import CUSTOM_ROLES, STACK_ASSIGNED_BUILT_IN_ROLES, custom_role_guid
from scripts import bootstrap_ci
from scripts.bootstrap_ci import Fork

SUBSCRIPTION = "11111111-2222-4333-8444-555555555555"
STATE_GROUP = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-state/providers"
STATE = f"{STATE_GROUP}/Microsoft.Storage/storageAccounts/st/blobServices/default/containers/state"
KEY = f"{STATE_GROUP}/Microsoft.KeyVault/vaults/kv/keys/pulumi"
PRINCIPALS = {"preview": "p-0", "deploy": "d-0", "smoke": "s-0"}
USER_ACCESS_ADMINISTRATOR = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
KEY_VAULT_CRYPTO_USER = "12338af0-0e69-4776-bea7-57ae8d297424"


def _fork(**changes: Any) -> Fork:
    return Fork("my-org/claim-check", SUBSCRIPTION, state_container=STATE, key=KEY, **changes)


def _by_identity(fork: Fork) -> dict[str, list[bootstrap_ci.Assignment]]:
    plan: dict[str, list[bootstrap_ci.Assignment]] = {}
    for assignment in bootstrap_ci.planned_assignments(fork, PRINCIPALS):
        plan.setdefault(assignment.identity, []).append(assignment)
    return plan


def test_preview_identity_only_reads_state_and_only_decrypts_the_key() -> None:
    """Reader on each stack's group, Blob Data Reader on the state container (a dry run writes
    nothing there), and a custom role whose one permission is the key's decrypt data action."""
    fork = _fork()
    preview = {(a.role, a.scope) for a in _by_identity(fork)["preview"]}
    decrypt = bootstrap_ci.decrypt_role(fork)
    assert decrypt is not None
    assert preview == {
        (bootstrap_ci.READER, fork.resource_group_id("dev")),
        (bootstrap_ci.READER, fork.resource_group_id("prod")),
        (bootstrap_ci.BLOB_DATA_READER, STATE),
        (decrypt.name, KEY),
    }
    assert decrypt.actions == ()
    assert decrypt.data_actions == ("Microsoft.KeyVault/vaults/keys/decrypt/action",)
    assert decrypt.assignable_scopes == (KEY,)
    assert not {a.condition for a in _by_identity(fork)["preview"]} - {None}


def test_deploy_identity_cannot_escalate() -> None:
    """Scoped to the stacks' groups, never the subscription; no Owner, User Access Administrator or
    Key Vault Crypto User; role assignment only through the conditioned RBAC Administrator; and no
    right to write role definitions, so the custom roles the condition allows cannot be redefined."""
    fork = _fork()
    deploy = _by_identity(fork)["deploy"]
    roles = {a.role for a in deploy}
    assert not roles & {OWNER, USER_ACCESS_ADMINISTRATOR, KEY_VAULT_CRYPTO_USER}
    groups = {fork.resource_group_id(stack) for stack in fork.stacks}
    assert {a.scope for a in deploy} == groups | {STATE, KEY}
    assert not [a for a in deploy if a.scope == f"/subscriptions/{SUBSCRIPTION}"]
    admins = [a for a in deploy if a.role == bootstrap_ci.RBAC_ADMINISTRATOR]
    assert {a.scope for a in admins} == groups
    custom = {role.name: role for role in bootstrap_ci.custom_roles(fork)}
    assert set(roles) - set(bootstrap_ci.ROLE_NAMES) == {bootstrap_ci.decrypt_role(fork).name}  # type: ignore[union-attr]
    assert not [r for r in custom.values() if any("Microsoft.Authorization" in a for a in r.actions)]
    assert _by_identity(fork).get("smoke") is None  # no Azure role at all


def test_subscription_scope_is_an_explicit_choice() -> None:
    """--subscription-scope: the groups do not exist yet, so the stack defines its custom roles and
    the deploy identity gets a role that writes only role definitions, at the subscription."""
    fork = _fork(resource_group_scope=False)
    deploy = _by_identity(fork)["deploy"]
    assert {a.scope for a in deploy} == {f"/subscriptions/{SUBSCRIPTION}", STATE, KEY}
    writer = bootstrap_ci.role_writer_role(fork)
    assert writer.name in {a.role for a in deploy}
    assert writer.actions == bootstrap_ci.ROLE_DEFINITION_ACTIONS
    assert bootstrap_ci.stack_roles(fork) == []


def test_rbac_administrator_condition_allows_exactly_the_stacks_roles() -> None:
    """The condition's role GUIDs are the built-in roles the program assigns plus the stack's custom
    roles at each stack's group (infra/roles.py, one source of truth); principal types are users,
    groups and service principals; the deploy identity itself is excluded."""
    fork = _fork()
    (condition, *_) = {a.condition for a in _by_identity(fork)["deploy"] if a.condition}
    written = re.search(
        r"@Request\[[^\]]+:RoleDefinitionId\] ForAnyOfAnyValues:GuidEquals \{([^}]*)\}", condition
    )
    deleted = re.search(
        r"@Resource\[[^\]]+:RoleDefinitionId\] ForAnyOfAnyValues:GuidEquals \{([^}]*)\}", condition
    )
    assert written is not None
    assert deleted is not None
    custom = {
        custom_role_guid(fork.resource_group_id(stack), role)
        for stack in fork.stacks
        for role in CUSTOM_ROLES
    }
    expected = {role.value for role in STACK_ASSIGNED_BUILT_IN_ROLES} | custom
    assert set(written.group(1).split(", ")) == expected == set(deleted.group(1).split(", "))
    assert USER_ACCESS_ADMINISTRATOR not in condition
    assert OWNER not in condition
    assert "StringEqualsIgnoreCase {'User', 'Group', 'ServicePrincipal'}" in condition
    assert "PrincipalId] ForAnyOfAllValues:GuidNotEquals {d-0}" in condition


def test_graph_permissions_are_the_three_the_stack_needs() -> None:
    preview, deploy, smoke = bootstrap_ci.apps(_fork())
    assert preview.graph_roles == smoke.graph_roles == ()
    assert {role.value for role in deploy.graph_roles} == {
        "Application.ReadWrite.OwnedBy",
        "AppRoleAssignment.ReadWrite.All",
        "Application.Read.All",
    }


def test_names_differ_between_forks_and_subjects_are_per_fork() -> None:
    """Two forks in one tenant and subscription share no application, group or custom role name."""
    first, second = (
        Fork("org-a/claim-check", SUBSCRIPTION, key=KEY),
        Fork("org-b/claim-check", SUBSCRIPTION, key=KEY),
    )
    assert {a.unique_name for a in bootstrap_ci.apps(first)}.isdisjoint(
        a.unique_name for a in bootstrap_ci.apps(second)
    )
    assert first.resource_group("dev") != second.resource_group("dev")
    assert {r.name for r in bootstrap_ci.custom_roles(first)}.isdisjoint(
        r.name for r in bootstrap_ci.custom_roles(second)
    )
    preview, deploy, smoke = bootstrap_ci.apps(first)
    assert preview.subjects == ("repo:org-a/claim-check:pull_request",)
    assert (
        deploy.subjects
        == smoke.subjects
        == (
            "repo:org-a/claim-check:environment:dev",
            "repo:org-a/claim-check:environment:prod",
        )
    )
    long = Fork("an-organisation-with-a-long-name/" + "r" * 90, SUBSCRIPTION)
    assert len(long.resource_group("prod")) <= 90
    assert len(long.app_name("preview")) <= 120


def test_bad_repo_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bootstrap_ci.main(["--repo", "claim-check", "--subscription", SUBSCRIPTION])
    assert "<owner>/<repo>" in capsys.readouterr().err


@pytest.fixture
def az(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in `az` first on PATH; returns its state file."""
    state = tmp_path / "az-state.json"
    standin = Path(__file__).with_name("azure_cli_standin.py")
    shim = tmp_path / "az"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{standin}" "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AZ_STANDIN_STATE", str(state))
    return state


ARGS = [
    "--repo",
    "my-org/claim-check",
    "--subscription",
    SUBSCRIPTION,
    "--state-container-scope",
    STATE,
    "--key-scope",
    KEY,
]


def _writes(state: Path) -> list[list[str]]:
    """The logged commands that change something: creates, updates, and Graph PATCH/POST."""
    log = json.loads(state.read_text())["log"]
    verbs = {"create", "update", "delete", "PATCH", "POST", "DELETE"}
    return [command for command in log if verbs & set(command[:5])]


def test_apply_creates_everything_and_a_rerun_changes_nothing(
    az: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first run creates (the stand-in refuses any duplicate); the second only looks up and says
    so; the stack config lines carry the created service principals' ids."""
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 0
    first = capsys.readouterr().out
    state = json.loads(az.read_text())
    assert len(state["apps"]) == 3
    assert len(state["sps"]) == 4
    assert sum(len(c) for c in state["credentials"].values()) == 5
    assert len(state["graph_assignments"]) == 3
    assert len(state["role_assignments"]) == len(bootstrap_ci.planned_assignments(_fork(), PRINCIPALS))
    assert set(state["groups"]) == {
        "rg-claimcheck-my-org-claim-check-dev",
        "rg-claimcheck-my-org-claim-check-prod",
    }
    smoke_sp = next(
        sp["id"]
        for sp in state["sps"]
        for app in state["apps"]
        if app["appId"] == sp["appId"] and app["uniqueName"].endswith("-smoke")
    )
    assert f"'claimcheck:smokeTestPrincipals[0].objectId' \\\n    {smoke_sp}" in first
    assert "claimcheck:createResourceGroup \\\n    false" in first
    writes_before = len(_writes(az))

    assert bootstrap_ci.main([*ARGS, "--apply"]) == 0
    second = capsys.readouterr().out
    assert "Nothing to change" in second
    assert "created" not in second
    assert "updated" not in second
    assert len(_writes(az)) == writes_before


def test_plan_only_runs_lookups(az: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bootstrap_ci.main(ARGS) == 0
    out = capsys.readouterr().out
    assert "would create  application claimcheck-ci-my-org-claim-check-deploy" in out
    assert "run again with --apply" in out
    assert _writes(az) == []


def test_plan_after_a_deleted_custom_role_plans_its_assignments(
    az: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A custom role deleted by hand: the plan says it and its assignments will be created, without
    the lookup by a role name that does not exist (which the CLI refuses)."""
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 0
    state = json.loads(az.read_text())
    state["role_definitions"] = []
    state["role_assignments"] = [
        a for a in state["role_assignments"] if not a["role"].startswith("Claim Check")
    ]
    az.write_text(json.dumps(state))
    capsys.readouterr()
    assert bootstrap_ci.main(ARGS) == 0
    out = capsys.readouterr().out
    assert "would create  custom role Claim Check state decrypt (my-org-claim-check)" in out
    assert "would create  deploy: Claim Check state decrypt" in out
    assert "would create  preview: Claim Check state decrypt" in out
    assert "would create  preview: Reader" not in out


def test_a_failure_prints_the_cli_error(
    az: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed-in account without the right to assign roles: the run stops at the first role
    assignment with the CLI's own message (the old script's check=True hid it)."""
    monkeypatch.setenv("AZ_STANDIN_FAIL", "role assignment create")
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 1
    captured = capsys.readouterr()
    assert "(AuthorizationFailed)" in captured.err
    assert "roleAssignments/write" in captured.err
    assert "created  application claimcheck-ci-my-org-claim-check-preview" in captured.out


def test_a_federated_credential_for_another_subject_is_refused(
    az: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 0
    state = json.loads(az.read_text())
    for credentials in state["credentials"].values():
        for credential in credentials:
            credential["subject"] = "repo:someone-else/claim-check:pull_request"
    az.write_text(json.dumps(state))
    capsys.readouterr()
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 1
    assert "for another subject" in capsys.readouterr().err


def test_a_second_fork_in_the_same_tenant_and_subscription_touches_nothing_of_the_first(
    az: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fork B's bootstrap after fork A's creates its own applications, groups and custom roles and
    adds no federated credential to A's applications (the old script's shared default name did)."""
    assert bootstrap_ci.main([*ARGS, "--apply"]) == 0
    before = json.loads(az.read_text())
    other = ["--repo", "someone-else/claim-check", *ARGS[2:]]
    assert bootstrap_ci.main([*other, "--apply"]) == 0
    capsys.readouterr()
    after = json.loads(az.read_text())
    for app in before["apps"]:
        assert after["credentials"][app["appId"]] == before["credentials"][app["appId"]]
    assert len(after["apps"]) == 6
    assert len(after["groups"]) == 4
    names = [d["roleName"] for d in after["role_definitions"]]
    assert len(names) == len(set(names)) == 2 * len(before["role_definitions"])
