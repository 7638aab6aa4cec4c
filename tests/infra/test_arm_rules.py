"""ARM's service-side rules (infra/arm_rules.py) over what both stacks register under mocks.

Each stack as shipped breaks no rule; each rule is also fed a crafted violation (one registered resource
changed the way a config or code edit would change it) and must report it, so no row is dead.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from pulumi_azure_native import web

from infra.arm_rules import RULES, Violation, violations
from tests.infra.pulumi_harness import ArmRejected, ProgramRun, Registered, run_program
from tests.infra.stacks import Stack, stack_run


def test_stacks_as_shipped_break_no_arm_rule(stack: Stack) -> None:
    """dev, prod and prod with principals: zero violations of the documented Azure restrictions."""
    _, run = stack
    assert [str(found) for found in violations(run.resources)] == []


def test_every_rule_has_a_source_and_a_crafted_violation() -> None:
    """Each row cites where it comes from, and has a case below (a row without one could be dead)."""
    assert all(rule.sources and all(url.startswith("https://") for url in rule.sources) for rule in RULES)
    assert len({rule.id for rule in RULES}) == len(RULES)
    assert {rule.id for rule in RULES} == set(CRAFTED)


# Edits a resource's inputs in place; also given the stack's resources, for an edit that names another.
Change = Callable[[dict[str, Any], list[Registered]], None]


@dataclasses.dataclass(frozen=True)
class Crafted:
    stack: str
    changed: str  # type suffix of the resource the edit changes (the first one registered)
    change: Change
    # The resource reported, if not the changed one: type suffix and a part of its logical name.
    flagged: tuple[str, str] | None = None
    where: Callable[[Registered], bool] = lambda _: True  # which resource of that type to change


def _set(path: str, value: Any) -> Change:
    def change(inputs: dict[str, Any], _: list[Registered]) -> None:
        *parents, last = path.split(".")
        target = inputs
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return change


def _scale(key: str, value: Any) -> Change:
    return _set(f"functionAppConfig.scaleAndConcurrency.{key}", value)


def _add_app_setting(name: str, value: str) -> Change:
    def change(inputs: dict[str, Any], _: list[Registered]) -> None:
        inputs["siteConfig"]["appSettings"].append({"name": name, "value": value})

    return change


def _http5xx_alert_on_the_app(inputs: dict[str, Any], resources: list[Registered]) -> None:
    """The alert this stack had: Http5xx on the Function App, a metric Flex does not emit."""
    app = next(resource for resource in resources if resource.type.endswith(":WebApp"))
    inputs["scopes"] = [app.id]
    inputs["criteria"]["allOf"][0].update(metricName="Http5xx", metricNamespace="Microsoft.Web/sites")


def _standard_namespace(inputs: dict[str, Any], _: list[Registered]) -> None:
    """prod's namespace downgraded to Standard (zone redundancy off too, a rule of its own)."""
    inputs.update(sku={"name": "Standard", "tier": "Standard"}, zoneRedundant=False)


def _lifecycle_rule_named(name: str) -> Change:
    def change(inputs: dict[str, Any], _: list[Registered]) -> None:
        inputs["policy"]["rules"][0]["name"] = name

    return change


CRAFTED: dict[str, Crafted] = {
    "flex-site-config-rejected": Crafted("dev", "WebApp", _set("siteConfig.ftpsState", "Disabled")),
    "flex-app-settings-rejected": Crafted(
        "prod", "WebApp", _add_app_setting("FUNCTIONS_WORKER_RUNTIME", "python")
    ),
    "flex-always-ready-zone-redundant": Crafted(
        "prod", "WebApp", _scale("alwaysReady", [{"name": "function:consume_document", "instanceCount": 1}])
    ),
    "flex-instance-memory": Crafted("dev", "WebApp", _scale("instanceMemoryMB", 1024)),
    "flex-maximum-instances": Crafted("dev", "WebApp", _scale("maximumInstanceCount", 20)),
    "flex-runtime": Crafted("dev", "WebApp", _set("functionAppConfig.runtime.version", "3.9")),
    "flex-subnet-delegation": Crafted(
        "prod",
        "Subnet",
        _set("delegations", []),
        flagged=("WebApp", ""),
        where=lambda r: "delegations" in r.inputs,
    ),
    "flex-deployment-storage-auth": Crafted(
        "dev",
        "WebApp",
        _set(
            "functionAppConfig.deployment.storage.authentication", {"type": "StorageAccountConnectionString"}
        ),
    ),
    "flex-alert-metrics": Crafted("dev", "MetricAlert", _http5xx_alert_on_the_app),
    "servicebus-private-endpoint-premium": Crafted(
        "prod", "Namespace", _standard_namespace, flagged=("PrivateEndpoint", "servicebus")
    ),
    "servicebus-zone-redundant-premium": Crafted("dev", "Namespace", _set("zoneRedundant", True)),
    "servicebus-premium-entity-partitioning": Crafted("prod", "Queue", _set("enablePartitioning", True)),
    "servicebus-large-messages-premium": Crafted("dev", "Topic", _set("maxMessageSizeInKilobytes", 102400)),
    "servicebus-duplicate-detection-window": Crafted(
        "dev", "Queue", _set("duplicateDetectionHistoryTimeWindow", "P8D")
    ),
    "servicebus-lock-duration": Crafted("dev", "Subscription", _set("lockDuration", "PT6M")),
    "servicebus-max-delivery-count": Crafted("dev", "Queue", _set("maxDeliveryCount", 0)),
    "storage-version-immutability-needs-versioning": Crafted(
        "prod",
        "BlobServiceProperties",
        _set("isVersioningEnabled", False),
        flagged=("BlobContainer", "evidence"),
    ),
    "storage-lifecycle-rules": Crafted(
        "dev", "ManagementPolicy", _lifecycle_rule_named("delete-provisional")
    ),
    "rbac-condition-version": Crafted(
        "dev",
        "RoleAssignment",
        _set("condition", "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers:name] == 'x'"),
    ),
    "rbac-principal-type": Crafted("dev", "RoleAssignment", _set("principalType", "Application")),
}


def _with_change(resources: list[Registered], case: Crafted) -> tuple[list[Registered], Registered]:
    """The stack's resources with one edited (a deep copy: the shared runs stay untouched)."""
    target = next(r for r in resources if r.type.endswith(f":{case.changed}") and case.where(r))
    inputs = copy.deepcopy(target.inputs)
    case.change(inputs, resources)
    edited = dataclasses.replace(target, inputs=inputs)
    return [edited if r is target else r for r in resources], edited


@pytest.mark.parametrize("rule_id", sorted(CRAFTED))
def test_each_rule_reports_its_crafted_violation(rule_id: str) -> None:
    """The edited stack breaks exactly that rule (reported on the resource the rule reads)."""
    case = CRAFTED[rule_id]
    resources, edited = _with_change(stack_run(case.stack)[1].resources, case)
    found = violations(resources)
    if case.flagged is None:
        flagged = edited
    else:
        suffix, part = case.flagged
        flagged = next(r for r in resources if r.type.endswith(f":{suffix}") and part in r.name)
    assert {(v.rule, v.resource) for v in found} == {(rule_id, flagged.name)}, [str(v) for v in found]


def test_sdk_site_config_args_breaks_the_flex_rule() -> None:
    """Why the site config is a mapping: SiteConfigArgs alone, with nothing Flex refuses, registers
    netFrameworkVersion 'v4.6' (its SDK default, pulumi/pulumi-azure-native#4168), which the rule
    reports; the same fields as a SiteConfigArgsDict register only what was written."""

    def program(site_config: Any) -> Callable[[], None]:
        def declare() -> None:
            plan = web.AppServicePlan(
                "plan",
                resource_group_name="rg",
                sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption"),
            )
            web.WebApp(
                "app",
                resource_group_name="rg",
                kind="functionapp,linux",
                server_farm_id=plan.id,
                site_config=site_config,
                opts=pulumi.ResourceOptions(depends_on=[plan]),
            )

        return declare

    def site_config_of(run: ProgramRun) -> dict[str, Any]:
        return dict(run.one("WebApp").inputs["siteConfig"])

    # arm_checked=False: these bare apps are what ARM refuses, on purpose.
    with_args = run_program(
        program(web.SiteConfigArgs(min_tls_version="1.2")), stack="dev", arm_checked=False
    )
    assert site_config_of(with_args).get("netFrameworkVersion") == "v4.6"
    # (The bare app breaks the other Flex rules too: it has no functionAppConfig.)
    assert "flex-site-config-rejected" in {v.rule for v in violations(with_args.resources)}
    as_mapping = run_program(
        program(web.SiteConfigArgsDict(min_tls_version="1.2")), stack="dev", arm_checked=False
    )
    assert site_config_of(as_mapping) == {"minTlsVersion": "1.2"}
    assert "flex-site-config-rejected" not in {v.rule for v in violations(as_mapping.resources)}


def test_violation_names_rule_resource_and_reason() -> None:
    """What a failing check prints: rule id, the resource's logical name, the documented reason."""
    found = Violation("flex-runtime", "claimcheck-dev-functions-app", "runtime is one of ...")
    assert str(found) == "flex-runtime on claimcheck-dev-functions-app: runtime is one of ..."


def _duplicate_lifecycle_rule(inputs: dict[str, Any], _: list[Registered]) -> None:
    rules = inputs["policy"]["rules"]
    rules.append(copy.deepcopy(rules[0]))


# Other branches of rows with more than one condition, each through the same path.
OTHER_BRANCHES = [
    pytest.param(
        "flex-app-settings-rejected", _add_app_setting("ServiceBus:ConnectionString", "x"), id="colon"
    ),
    pytest.param(
        "flex-deployment-storage-auth",
        _set(
            "functionAppConfig.deployment.storage.authentication.userAssignedIdentityResourceId",
            "/subscriptions/s/resourceGroups/g/providers/Microsoft.ManagedIdentity/userAssignedIdentities/other",
        ),
        id="identity-not-the-apps",
    ),
    pytest.param("flex-runtime", _set("functionAppConfig.runtime.name", "ruby"), id="runtime-name"),
    pytest.param("flex-maximum-instances", _scale("maximumInstanceCount", 1001), id="above-1000"),
    pytest.param("storage-lifecycle-rules", _duplicate_lifecycle_rule, id="duplicate-name"),
    pytest.param("rbac-condition-version", _set("conditionVersion", "2.0"), id="version-without-condition"),
]


@pytest.mark.parametrize(("rule_id", "change"), OTHER_BRANCHES)
def test_other_branches_of_a_rule_report_too(rule_id: str, change: Change) -> None:
    """A second way to break the same row is reported as that row, on the edited resource."""
    case = dataclasses.replace(CRAFTED[rule_id], change=change)
    resources, edited = _with_change(stack_run(case.stack)[1].resources, case)
    assert [(v.rule, v.resource) for v in violations(resources)] == [(rule_id, edited.name)]


def test_the_mocks_refuse_what_arm_refuses() -> None:
    """run_program plays ARM's rules of the table: a program registering a refused shape fails as
    `pulumi up` would, so every infra test runs against mocks as strict as the table."""

    def program() -> None:
        plan = web.AppServicePlan(
            "plan", resource_group_name="rg", sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption")
        )
        web.WebApp(
            "app",
            resource_group_name="rg",
            kind="functionapp,linux",
            server_farm_id=plan.id,
            site_config=web.SiteConfigArgsDict(ftps_state="Disabled"),
        )

    with pytest.raises(ArmRejected, match="flex-site-config-rejected"):
        run_program(program, stack="dev")
