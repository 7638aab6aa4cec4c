"""What keeps a deployment from colliding, half-failing or losing data (issue 9, blockers 3-6 and
stateful resources), each proven on the program run offline under mocks."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from infra import entrypoint
from infra.components.messaging import FALSE_FILTER, TRUE_FILTER
from infra.program import deploy
from infra.roles import PAYLOAD_OPERATOR, custom_role_display_name
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from tests.infra.pulumi_harness import SUBSCRIPTION_ID, ProgramRun, run_program

OTHER_SUBSCRIPTION = "12345678-9abc-4def-8123-456789abcdef"


def _run(stack: str, config: dict[str, Any] | None = None, subscription_id: str | None = None) -> ProgramRun:
    settings = load_settings(config or {}, stack)
    return run_program(
        lambda: deploy(settings), stack=stack, subscription_id=subscription_id or SUBSCRIPTION_ID
    )


def _role_names(run: ProgramRun) -> set[str]:
    return {definition.inputs["roleName"] for definition in run.of_type("RoleDefinition")}


def test_custom_role_names_differ_between_stacks_in_one_tenant() -> None:
    """Two forks' `dev` stacks (same group name, other subscription) and two stacks in one subscription
    get different custom role display names; the same stack gets the same names on every run."""
    dev = _role_names(_run("dev"))
    assert dev == _role_names(_run("dev"))
    other_subscription = _role_names(_run("dev", subscription_id=OTHER_SUBSCRIPTION))
    other_stack = _role_names(_run("dev2", {"resourceGroupName": "rg-claimcheck-dev"}))
    assert len(dev) == len(other_subscription) == len(other_stack) == 1
    assert dev.isdisjoint(other_subscription)
    assert dev.isdisjoint(other_stack)
    assert all(name.startswith(PAYLOAD_OPERATOR.display_name) for name in dev | other_stack)


def test_custom_role_display_name_fits_azure() -> None:
    """A long scope and stack still give a name Azure accepts (custom role names: at most 128 chars)."""
    scope = "/subscriptions/" + OTHER_SUBSCRIPTION + "/resourceGroups/" + "g" * 90
    name = custom_role_display_name(PAYLOAD_OPERATOR, scope, "claimcheck/" + "s" * 40)
    assert len(name) <= 128


def _default_rules(run: ProgramRun) -> dict[str, tuple[str, str]]:
    """Subscription -> (logical name of its DefaultRule, its SQL filter)."""
    return {
        rule.inputs["subscriptionName"]: (rule.name, rule.inputs["sqlFilter"]["sqlExpression"])
        for rule in run.of_type("DefaultRule")
    }


def test_rules_added_or_removed_update_default_rule_and_never_delete_it() -> None:
    """rules -> none and none -> rules: every subscription keeps one `$Default` resource under the same
    URN (an update, never a delete), matching everything without rules and nothing with them."""
    before = _run("dev")
    changed = _run(
        "dev",
        {
            "topology": {
                "topics": [
                    {
                        "name": "results",
                        "subscriptions": [
                            {
                                "name": "audit",
                                "rules": [
                                    {"name": "contracts-only", "sqlFilter": "document_type = 'contract'"}
                                ],
                            },
                            {"name": "notifications", "rules": []},
                        ],
                    }
                ]
            }
        },
    )
    old, new = _default_rules(before), _default_rules(changed)
    assert set(old) == set(new) == {"audit", "notifications", "review", "contracts"}
    assert old["audit"][1] == TRUE_FILTER
    assert new["audit"][1] == FALSE_FILTER
    assert old["notifications"][1] == FALSE_FILTER
    assert new["notifications"][1] == TRUE_FILTER
    assert {sub: name for sub, (name, _) in old.items()} == {sub: name for sub, (name, _) in new.items()}
    for run in (before, changed):
        urns = {rule.name: run.registrations[rule.name] for rule in run.of_type("DefaultRule")}
        assert all(registration.retain_on_delete for registration in urns.values())
    assert {before.registrations[name].urn for name, _ in old.values()} == {
        changed.registrations[name].urn for name, _ in new.values()
    }
    rules_by_subscription = {rule.inputs["subscriptionName"] for rule in changed.of_type("Rule")}
    assert "notifications" not in rules_by_subscription
    assert "audit" in rules_by_subscription


@pytest.mark.parametrize(
    "object_id",
    [
        "00000000-0000-0000-0000-000000000000",
        "00000000-0000-0000-0000-000000000001",
        "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
        "11111111-1111-1111-1111-111111111111",
    ],
)
def test_placeholder_principal_guid_is_refused_naming_the_key(object_id: str) -> None:
    """Nil, max, one-digit and 00000000-…-00000000000N GUIDs are refused with the key named."""
    config = {
        "producerPrincipals": [
            {"name": "ok", "objectId": "3f2b8c1e-7d4a-4e6b-9c2f-1a5d8e7b6c4f"},
            {"name": "intake", "objectId": object_id},
        ]
    }
    key = r"claimcheck:producerPrincipals\[1\]\.objectId"
    with pytest.raises(StackConfigError, match=key + ": .*placeholder"):
        load_settings(config, "prod")


def test_prod_as_shipped_deploys_and_a_placeholder_stops_before_any_resource() -> None:
    """Pulumi.prod.yaml as shipped declares the whole stack; a placeholder producer stops the program
    with a RunError naming the key before a single resource is registered."""
    config = read_stack_config("prod")
    shipped = run_program(entrypoint.run, stack="prod", config=config)
    assert shipped.of_type("RoleAssignment")
    assert shipped.of_type("WebApp")
    bad = {
        **config,
        "producerPrincipals": [
            {"name": "intake-service", "objectId": "00000000-0000-0000-0000-000000000001"}
        ],
    }
    registered: list[ProgramRun] = []
    with pytest.raises(pulumi.RunError, match=r"claimcheck:producerPrincipals\[0\]\.objectId"):
        registered.append(run_program(entrypoint.run, stack="prod", config=bad))
    assert not registered


def _stateful(run: ProgramRun) -> dict[str, Any]:
    account = next(a for a in run.of_type("StorageAccount") if a.name.startswith("ccpay"))
    return {
        "account": run.registrations[account.name],
        "namespace": run.registrations[run.one("Namespace").name],
    }


@pytest.mark.parametrize(("stack", "protected"), [("dev", False), ("prod", True), ("qa", True)])
def test_payload_account_and_namespace_are_protected_outside_dev(stack: str, protected: bool) -> None:
    """protect (a delete or replacement stops `pulumi up`) on the payload account and namespace, except
    in dev; claimcheck:protectStatefulResources overrides the default either way."""
    assert {r.protect for r in _stateful(_run(stack)).values()} == {protected}
    override = {"protectStatefulResources": not protected}
    assert {r.protect for r in _stateful(_run(stack, override)).values()} == {not protected}


def test_changing_environment_keeps_payload_account_identity() -> None:
    """Editing claimcheck:environment changes no URN and no resource group name of the payload account
    or the namespace: names derive from the stack name, so nothing is silently replaced."""
    before, after = _run("dev"), _run("dev", {"environment": "staging"})
    for key in ("account", "namespace"):
        assert _stateful(before)[key].urn == _stateful(after)[key].urn
    group = {run.one("ResourceGroup").inputs["resourceGroupName"] for run in (before, after)}
    assert group == {"rg-claimcheck-dev"}
    names = [{r.name for r in run.resources} for run in (before, after)]
    assert names[0] == names[1]


def test_stack_name_unusable_in_names_is_refused() -> None:
    """A stack name that cannot start resource names is refused with a message saying why."""
    with pytest.raises(StackConfigError, match="stack name '1st'"):
        load_settings({"environment": "qa"}, "1st")


def test_smoke_test_principal_has_no_azure_role() -> None:
    """claimcheck:smokeTestPrincipals grants nothing in Azure (the smoke test goes through the HTTP
    API, so it works with a private namespace): no role assignment names the principal, also with a
    topology that has no `audit` subscription."""
    principal = "6c1f3a2b-9d8e-4f7a-b6c5-d4e3f2a1b0c9"
    config = {
        "smokeTestPrincipals": [{"name": "ci-smoke", "objectId": principal}],
        "topology": {
            "topics": [{"name": "events", "subscriptions": [{"name": "all"}]}],
            "bindings": {"resultsTopic": "events"},
        },
    }
    run = _run("dev", config)
    assert [a for a in run.of_type("RoleAssignment") if a.inputs["principalId"] == principal] == []
