"""The API's Entra ID identity under Pulumi mocks: app registration, app roles, service principal,
producer app-role assignments, the token-gate app settings and the access table, outputs, policy."""

from __future__ import annotations

import json
from inspect import signature
from typing import Any

import pytest
from claimcheck.access import ACCESS_TABLE_SETTING, AccessTable
from claimcheck.callers import AppRole
from claimcheck.settings import AUDIENCE_SETTING, ISSUER_SETTING, JWKS_URI_SETTING

from infra.components.identity import app_role_id
from infra.policy import rules
from infra.program import SMOKE_TENANT, deploy
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from scripts.ops_release import smoke
from tests.infra.pulumi_harness import (
    API_CLIENT_ID,
    API_SERVICE_PRINCIPAL_ID,
    TENANT_ID,
    ProgramRun,
    run_program,
)
from tests.infra.stacks import GROUP_GRANT, PRODUCER, stack_run

SMOKE_OBJECT_ID = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


def _app_settings(run: ProgramRun) -> dict[str, Any]:
    pairs = run.one("WebApp").inputs["siteConfig"]["appSettings"]
    return {pair["name"]: pair["value"] for pair in pairs}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_api_has_an_app_registration_with_app_roles_and_a_service_principal(stack: str) -> None:
    settings, run = stack_run(stack)
    registration = run.one("ApplicationRegistration")
    assert registration.inputs["requestedAccessTokenVersion"] == 2
    assert registration.inputs["signInAudience"] == "AzureADMyOrg"
    roles = {role.inputs["value"]: role.inputs for role in run.of_type("ApplicationAppRole")}
    assert set(roles) == {"Documents.Submit", "WorkItems.Read", "Operations.Manage"}
    for value, role in roles.items():
        assert role["allowedMemberTypes"] == ["Application"]  # service principals, not users
        assert role["roleId"] == app_role_id(settings.environment, AppRole(value))
    assert run.one("ApplicationIdentifierUri").inputs["identifierUri"] == f"api://{API_CLIENT_ID}"
    principal = run.one("ServicePrincipal").inputs
    assert principal == {"clientId": API_CLIENT_ID, "appRoleAssignmentRequired": True}


def test_role_ids_are_stable_per_environment_and_differ_between_roles() -> None:
    ids = {app_role_id("dev", role) for role in AppRole}
    assert len(ids) == len(AppRole)
    submit = app_role_id("dev", AppRole.SUBMIT)
    assert submit == app_role_id("dev", AppRole.SUBMIT) != app_role_id("prod", AppRole.SUBMIT)


def test_each_producer_is_assigned_its_app_roles_on_the_api() -> None:
    settings, run = stack_run("prod+producer")
    assignments = {
        (a.inputs["appRoleId"], a.inputs["principalObjectId"], a.inputs["resourceObjectId"])
        for a in run.of_type("AppRoleAssignment")
    }
    assert assignments == {
        (app_role_id(settings.environment, role), PRODUCER["objectId"], API_SERVICE_PRINCIPAL_ID)
        for role in (AppRole.SUBMIT, AppRole.READ)
    }
    assert stack_run("prod")[1].of_type("AppRoleAssignment") == []


def test_the_app_gets_the_token_gate_and_the_access_table_from_the_stack_config() -> None:
    _, run = stack_run("prod+producer")
    settings = _app_settings(run)
    assert settings[ISSUER_SETTING] == f"https://login.microsoftonline.com/{TENANT_ID}/v2.0"
    assert settings[JWKS_URI_SETTING] == f"https://login.microsoftonline.com/{TENANT_ID}/discovery/v2.0/keys"
    assert settings[AUDIENCE_SETTING] == f"api://{API_CLIENT_ID},{API_CLIENT_ID}"
    table = AccessTable.parse(settings[ACCESS_TABLE_SETTING])
    assert [grant.to_json() for grant in table.grants] == [
        {
            "name": "intake-service",
            "principal": PRODUCER["objectId"],
            "tenants": ["acme", "acme-eu"],
            "classifications": ["confidential", "internal"],
        },
        {
            "name": "reviewers",
            "group": GROUP_GRANT["groupId"],
            "tenants": ["globex"],
            "purposes": ["contract-review"],
        },
    ]
    assert json.loads(_app_settings(stack_run("prod")[1])[ACCESS_TABLE_SETTING]) == []


def test_group_grants_turn_on_the_apis_group_claims() -> None:
    """Entra emits the `groups` claim the group grants match only when the registration asks for it."""
    with_groups = stack_run("prod+producer")[1].one("ApplicationRegistration").inputs
    assert with_groups["groupMembershipClaims"] == ["SecurityGroup"]
    assert "groupMembershipClaims" not in stack_run("prod")[1].one("ApplicationRegistration").inputs


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"groupId": "not-a-guid"}, "groupId"),
        ({"groupId": "00000000-0000-0000-0000-000000000000"}, "placeholder"),
        ({"tenants": []}, "tenants"),
        ({"tenants": ["acme"], "classifications": ["secret"]}, "classifications"),
        ({"principal": "x"}, "expected a list"),
        ({"name": "Reviewers"}, "name"),
    ],
)
def test_a_bad_group_grant_is_refused_naming_it(change: dict[str, Any], named: str) -> None:
    entry = {**GROUP_GRANT, **change}
    with pytest.raises(StackConfigError, match=rf"claimcheck:groupGrants\[0\].*{named}"):
        load_settings({"groupGrants": [entry]}, "dev")
    with pytest.raises(StackConfigError, match="unique"):
        load_settings({"groupGrants": [GROUP_GRANT, GROUP_GRANT]}, "dev")


def test_callers_find_the_audience_client_id_issuer_and_roles_in_the_outputs() -> None:
    _, run = stack_run("dev")
    assert run.outputs["apiAudience"] == f"api://{API_CLIENT_ID}"
    assert run.outputs["apiClientId"] == API_CLIENT_ID
    assert run.outputs["apiIssuer"] == f"https://login.microsoftonline.com/{TENANT_ID}/v2.0"
    assert sorted(run.outputs["apiAppRoles"]) == ["Documents.Submit", "Operations.Manage", "WorkItems.Read"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"appRoles": ["Documents.Delete"]}, "appRoles"),
        ({"tenants": ["acme' or ''='"]}, "tenants"),
        ({"tenants": ["*"]}, "tenants"),
        ({"tenants": ["acme"], "classifications": ["secret"]}, "classifications"),
        ({"purposes": ["contract-review"]}, "need tenants"),
        ({"tenants": "acme"}, "tenants"),
        ({"role": "x"}, "expected a list"),
    ],
)
def test_a_bad_producer_access_entry_is_refused_naming_it(change: dict[str, Any], named: str) -> None:
    entry = {"name": "intake", "objectId": PRODUCER["objectId"], **change}
    with pytest.raises(StackConfigError, match=rf"claimcheck:producerPrincipals\[0\].*{named}"):
        load_settings({"producerPrincipals": [entry]}, "dev")


def test_policy_refuses_a_function_app_without_its_token_gate() -> None:
    """The pack's form of "no HTTP route with anonymous access"; the stacks' own app passes."""
    for stack in ("dev", "prod"):
        assert rules.token_gate_violations(stack_run(stack)[1].one("WebApp").inputs) == []
    assert rules.TOKEN_GATE_SETTINGS == (ISSUER_SETTING, AUDIENCE_SETTING, JWKS_URI_SETTING)
    settings = _app_settings(stack_run("dev")[1])
    for name in rules.TOKEN_GATE_SETTINGS:
        pairs = [{"name": key, "value": value} for key, value in settings.items() if key != name]
        app = {"kind": "functionapp,linux", "siteConfig": {"appSettings": pairs}}
        (problem,) = rules.token_gate_violations(app)
        assert name in problem
    plain_http = [
        {"name": key, "value": "http://127.0.0.1:7090/x" if key == ISSUER_SETTING else value}
        for key, value in settings.items()
    ]
    app = {"kind": "functionapp,linux", "siteConfig": {"appSettings": plain_http}}
    (problem,) = rules.token_gate_violations(app)
    assert "https" in problem
    assert rules.token_gate_violations({"kind": "app", "siteConfig": {"appSettings": []}}) == []


def test_smoke_test_identities_may_submit_and_read_for_the_smoke_tenant() -> None:
    """claimcheck-ops smoke runs as the CI identity: it gets the API roles and the `smoke-test` tenant."""
    config = read_stack_config("dev")
    config["smokeTestPrincipals"] = [{"name": "ci-deploy", "objectId": SMOKE_OBJECT_ID}]
    settings = load_settings(config, "dev")
    run = run_program(lambda: deploy(settings), stack="dev")
    assignments = {
        (a.inputs["appRoleId"], a.inputs["principalObjectId"]) for a in run.of_type("AppRoleAssignment")
    }
    assert assignments == {
        (app_role_id("dev", role), SMOKE_OBJECT_ID) for role in (AppRole.SUBMIT, AppRole.READ)
    }
    table = AccessTable.parse(_app_settings(run)[ACCESS_TABLE_SETTING])
    assert [(grant.principal, grant.tenants) for grant in table.grants] == [
        (SMOKE_OBJECT_ID, (SMOKE_TENANT,))
    ]
    assert signature(smoke).parameters["tenant"].default == SMOKE_TENANT
