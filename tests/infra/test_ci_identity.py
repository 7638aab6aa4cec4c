"""Issue 25 under Pulumi mocks: what the CI deploy identity may assign is exactly what the program
assigns; the API's Entra objects are owned by the CI identity wherever the first `up` runs; grants
to users and groups; a stack in the group the bootstrap created; data entities a rename cannot
delete."""

from __future__ import annotations

from typing import Any

import pytest
from claimcheck.callers import AppRole

from infra.program import deploy
from infra.roles import role_guid
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from scripts.bootstrap_ci import Fork, assignable_roles, stack_roles
from tests.infra.pulumi_harness import LAPTOP_USER_OBJECT_ID, SUBSCRIPTION_ID, ProgramRun, run_program

CI_DEPLOY = "4d3c2b1a-0f9e-4d8c-b7a6-958473625140"
ONCALL_GROUP = "9e8d7c6b-5a49-4382-a716-253443526170"
PERSON = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
SMOKE = "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d"
PRODUCER = "3f2b8c1e-7d4a-4e6b-9c2f-1a5d8e7b6c4f"
FORK = Fork("my-org/claim-check", SUBSCRIPTION_ID)


def _run(stack: str, extra: dict[str, Any], caller: str | None = None) -> ProgramRun:
    config = read_stack_config(stack) | extra
    settings = load_settings(config, stack)
    return run_program(lambda: deploy(settings), stack=stack, caller=caller or LAPTOP_USER_OBJECT_ID)


def _everyone(stack: str) -> dict[str, Any]:
    """Every kind of principal the stack config takes, in the group the bootstrap created."""
    return {
        "resourceGroupName": FORK.resource_group(stack),
        "createResourceGroup": False,
        "createCustomRoles": False,
        "producerPrincipals": [{"name": "intake", "objectId": PRODUCER, "tenants": ["acme"]}],
        "operatorPrincipals": [{"name": "oncall", "objectId": ONCALL_GROUP, "principalType": "Group"}],
        "smokeTestPrincipals": [{"name": "ci-smoke", "objectId": SMOKE}],
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_deploy_identity_may_assign_exactly_the_roles_the_program_assigns(stack: str) -> None:
    """Every role assignment the program declares (with producers, operators and smoke principals)
    is of a role the bootstrap's condition allows, and the condition allows nothing the program does
    not assign in that stack's group (custom roles of the other stack's group aside)."""
    run = _run(stack, _everyone(stack))
    assigned = {role_guid(a.inputs["roleDefinitionId"]) for a in run.of_type("RoleAssignment")}
    allowed = set(assignable_roles(Fork("my-org/claim-check", SUBSCRIPTION_ID, stacks=(stack,))))
    assert assigned == allowed


def test_a_stack_in_the_bootstraps_group_only_reads_it() -> None:
    """createResourceGroup and createCustomRoles false: no ResourceGroup and no RoleDefinition (the
    deploy identity can write neither); the custom-role assignments name the GUIDs the bootstrap
    defined in that group."""
    run = _run("dev", _everyone("dev"))
    assert run.of_type("ResourceGroup") == []
    assert run.of_type("RoleDefinition") == []
    assert run.outputs["resourceGroupName"] == FORK.resource_group("dev")
    defined = {
        role.guid for role in stack_roles(Fork("my-org/claim-check", SUBSCRIPTION_ID, stacks=("dev",)))
    }
    assigned = {role_guid(a.inputs["roleDefinitionId"]) for a in run.of_type("RoleAssignment")}
    assert defined <= assigned


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_bootstrap_defines_the_custom_roles_the_program_would(stack: str) -> None:
    """One source of truth: the stack's custom roles as the bootstrap writes them (GUID, name, data
    actions, assignable scope) are the RoleDefinitions the program declares in that group."""
    extra = {k: v for k, v in _everyone(stack).items() if k != "createCustomRoles"}
    run = _run(stack, extra)
    program = {
        (
            d.inputs["roleDefinitionId"],
            d.inputs["roleName"],
            tuple(d.inputs["permissions"][0]["dataActions"]),
            tuple(d.inputs["assignableScopes"]),
        )
        for d in run.of_type("RoleDefinition")
    }
    bootstrap = {
        (role.guid, role.name, role.data_actions, role.assignable_scopes)
        for role in stack_roles(Fork("my-org/claim-check", SUBSCRIPTION_ID, stacks=(stack,)))
    }
    assert program == bootstrap


@pytest.mark.parametrize("caller", [PERSON, CI_DEPLOY])
def test_ci_identity_owns_the_apis_entra_objects_wherever_up_runs(caller: str) -> None:
    """From a laptop the CI identity is added as owner of the registration (retained on delete, so
    a later run by CI, which drops that resource, keeps the ownership); when CI itself creates the
    registration Entra makes it owner, and adding it again would fail. The service principal lists it."""
    run = _run("dev", {"apiOwnerObjectIds": [CI_DEPLOY]}, caller)
    owners = run.of_type("ApplicationOwner")
    assert [o.inputs["ownerObjectId"] for o in owners] == ([CI_DEPLOY] if caller == PERSON else [])
    assert all(run.registrations[o.name].retain_on_delete for o in owners)
    assert run.one("ServicePrincipal").inputs["owners"] == [CI_DEPLOY]


def test_owner_ids_are_checked() -> None:
    with pytest.raises(StackConfigError, match=r"claimcheck:apiOwnerObjectIds\[0\]"):
        load_settings({"apiOwnerObjectIds": ["not-a-guid"]}, "dev")


def test_a_group_is_granted_as_a_group() -> None:
    """An on-call group as operator: every one of its role assignments says Group (ARM refuses a
    mismatched principalType); a group producer's app roles admit users and groups."""
    run = _run(
        "dev",
        {
            "operatorPrincipals": [{"name": "oncall", "objectId": ONCALL_GROUP, "principalType": "Group"}],
            "producerPrincipals": [{"name": "people", "objectId": PERSON, "principalType": "Group"}],
        },
    )
    types = {
        a.inputs["principalId"]: a.inputs["principalType"]
        for a in run.of_type("RoleAssignment")
        if a.inputs["principalId"] in (ONCALL_GROUP, PERSON)
    }
    # A producer holds no Azure role (only the app writes the truth): its group shows in the
    # app-role assignments below.
    assert set(types) == {ONCALL_GROUP}
    assert set(types.values()) == {"Group"}
    app_roles = {r.inputs["value"]: r.inputs["allowedMemberTypes"] for r in run.of_type("ApplicationAppRole")}
    assert app_roles.pop(AppRole.SUBMIT.value) == app_roles.pop(AppRole.READ.value) == ["Application", "User"]
    assert set(map(tuple, app_roles.values())) == {("Application",)}  # nobody of that kind holds them
    assert {a.inputs["principalObjectId"] for a in run.of_type("AppRoleAssignment")} == {PERSON}


def test_service_principals_stay_the_default() -> None:
    run = _run("dev", {"operatorPrincipals": [{"name": "oncall", "objectId": ONCALL_GROUP}]})
    assert {a.inputs["principalType"] for a in run.of_type("RoleAssignment")} == {"ServicePrincipal"}
    assert {tuple(r.inputs["allowedMemberTypes"]) for r in run.of_type("ApplicationAppRole")} == {
        ("Application",)
    }


@pytest.mark.parametrize("key", ["operatorPrincipals", "producerPrincipals", "smokeTestPrincipals"])
def test_an_unknown_principal_type_is_refused_naming_the_key(key: str) -> None:
    entry = {"name": "x", "objectId": ONCALL_GROUP, "principalType": "Device"}
    with pytest.raises(StackConfigError, match=rf"claimcheck:{key}\[0\]\.principalType: 'Device'"):
        load_settings({key: [entry]}, "dev")


DATA_TYPES = ("Queue", "Topic", "Subscription", "BlobContainer", "Table")


def _data(run: ProgramRun) -> list[Any]:
    """The entities of the payload storage and messaging components (the Functions host's own
    deployment container holds only the code package, uploaded again by every deploy)."""
    components = ("-storage-", "-messaging-")
    return [r for kind in DATA_TYPES for r in run.of_type(kind) if any(c in r.name for c in components)]


@pytest.mark.parametrize(("stack", "protected"), [("dev", False), ("prod", True)])
def test_data_entities_are_protected_outside_dev_and_never_deleted(stack: str, protected: bool) -> None:
    """Every queue, topic, subscription, container and table: protected outside dev (a delete or a
    replace stops `pulumi up`) and retained on delete everywhere (leaving the program drops it from
    the state, not from Azure)."""
    run = _run(stack, {})
    entities = _data(run)
    assert {kind.rsplit(":", 1)[-1] for kind in {r.type for r in entities}} == set(DATA_TYPES)
    assert {run.registrations[r.name].protect for r in entities} == {protected}
    assert {run.registrations[r.name].retain_on_delete for r in entities} == {True}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_renamed_entity_is_a_new_resource_and_the_old_one_is_kept(stack: str) -> None:
    """Both directions of a topology rename under mocks: an edit that renames nothing keeps every
    data entity's URN (no replace); a renamed table or queue is a new URN, and the old one is
    registered with retain_on_delete (dev: kept in Azure) and, in prod, protect (the engine refuses
    to delete it). Either way nothing is silently deleted."""
    before = _run(stack, {})
    unchanged = _run(stack, {"backlogAlertThreshold": 777})
    assert {r.name for r in _data(before)} == {r.name for r in _data(unchanged)}
    config = read_stack_config(stack)
    topology = dict(config.get("topology") or {})
    topology["tables"] = {"registry": "registry2"}
    renamed = _run(stack, {"topology": topology})
    gone = {r.name for r in _data(before)} - {r.name for r in _data(renamed)}
    assert len(gone) == 1
    (old,) = gone
    assert "registry" in old
    assert before.registrations[old].retain_on_delete
    assert before.registrations[old].protect == (stack == "prod")
