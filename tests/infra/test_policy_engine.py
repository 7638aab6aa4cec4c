"""The policy pack through the engine's own path (tests/infra/policy_engine.py): the pack as a plugin
process, Analyze on each registration's inputs, AnalyzeStack on every resource's outputs, in a first
preview (nothing exists: unknowns flow through the program) and in the update that creates it all.

The shipped stacks get no diagnostic at all (not even the SDK's advisory "can't run during preview");
each rule fires on a crafted violation at its enforcement level, so a rule that never fires fails here.
FIRST_PREVIEW records, per rule, whether a first preview enforces it (docs/deploy.md's table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra.policy_engine import (
    UNKNOWN,
    Diagnostic,
    EngineResource,
    EngineRun,
    PackPool,
    created_outputs,
    engine_run,
    output_types,
    pack_pool,
    preview_outputs,
)
from tests.infra.stacks import STACKS

PHASES = {"first-preview": True, "update": False}  # -> the program runs as a first preview
# A preview once everything exists sends the update's values and outputs to a dry-run pack.
SHIPPED_PHASES = {"first-preview": (True, True), "final-preview": (False, True), "update": (False, False)}
RULES = (
    "servicebus-entra-only-tls12",
    "servicebus-no-sas-rules",
    "storage-entra-only-private-tls12",
    "storage-private-containers",
    "functions-no-secrets-in-app-settings",
    "functions-no-anonymous-routes",
    "rbac-custom-roles-narrow",
    "production-data-services-private",
    "production-evidence-immutable",
    "rbac-data-roles-at-entity-scope",
)
# Whether a first preview of the shipped program enforces the rule. The two app-settings rules only
# see the list once it is known: the program computes it as one output of values a first preview
# does not know (the namespace's endpoint, the identity's client id), so they enforce at `pulumi up`.
FIRST_PREVIEW = dict.fromkeys(RULES, True)


@pytest.fixture(scope="module")
def packs() -> Iterator[PackPool]:
    yield from pack_pool()


def _diagnostics(packs: PackPool, run: EngineRun, *, dry_run: bool | None = None) -> list[Diagnostic]:
    return packs(run.stack, dry_run=run.preview if dry_run is None else dry_run).run(run)


@pytest.mark.parametrize("phase", SHIPPED_PHASES)
@pytest.mark.parametrize("stack_name", STACKS)
def test_shipped_stacks_get_no_diagnostic(packs: PackPool, stack_name: str, phase: str) -> None:
    """dev and prod as shipped (and prod with a producer, an operator and a group grant): no
    violation and no advisory, in a first preview, in a preview once it exists, and in the update."""
    first_preview, dry_run = SHIPPED_PHASES[phase]
    run = engine_run(stack_name, preview=first_preview)
    assert [(d.policy, d.level, d.message) for d in _diagnostics(packs, run, dry_run=dry_run)] == []


def test_the_engine_view_is_what_azure_native_returns() -> None:
    """The stand-in's shapes: outputs after a create hold no input-only property and no WebApp
    siteConfig; a first preview echoes literal inputs and leaves ids and generated names unknown."""
    update, first = engine_run("prod", preview=False), engine_run("prod", preview=True)
    assert "siteConfig" in update.one("WebApp").inputs
    assert "siteConfig" not in update.one("WebApp").outputs
    container = update.one("BlobContainer", "evidence")
    assert "containerName" not in container.outputs
    assert container.outputs["name"] == "evidence"
    definition = update.one("RoleDefinition")
    assert "roleDefinitionId" not in definition.outputs
    assert definition.outputs["name"] == definition.inputs["roleDefinitionId"]
    assert first.one("BlobContainer", "evidence").outputs["name"] == UNKNOWN
    assert first.one("BlobContainer", "evidence").outputs["metadata"] == container.outputs["metadata"]
    assignment = _assignment(first, "app-host-storage")
    assert assignment.inputs["scope"] == UNKNOWN
    assert assignment.property_dependencies["scope"] == [first.one("StorageAccount", "cchost").urn]


def test_the_pack_declares_every_rule_mandatory(packs: PackPool) -> None:
    assert packs("dev", dry_run=True).levels == {rule: "mandatory" for rule in RULES}


def _set(resource: EngineResource, key: str, value: Any) -> EngineResource:
    """A crafted input, echoed in the outputs when the type returns it."""
    resource.inputs[key] = value
    if key in output_types(resource.type):
        resource.outputs[key] = value
    return resource


def _add(
    run: EngineRun, like: EngineResource, kind: str, name: str, inputs: dict[str, Any]
) -> EngineResource:
    """A crafted resource registered beside `like` (same parent and provider)."""
    outputs = (
        preview_outputs(kind, inputs) if run.preview else created_outputs(kind, {**inputs, "name": name})
    )
    urn = like.urn.rsplit("::", 1)[0].rsplit("$", 1)[0] + f"${kind}::{name}"
    added = EngineResource(
        urn, "", kind, name, True, like.parent, [], {}, like.provider, False, inputs, outputs
    )
    run.resources.append(added)
    return added


def _scope_on(assignment: EngineResource, target: EngineResource) -> EngineResource:
    """The assignment's scope becomes `target`'s id: unknown in a first preview, where the engine's
    property dependency still says where it comes from."""
    _set(assignment, "scope", target.id or UNKNOWN)
    assignment.property_dependencies["scope"] = [target.urn]
    return assignment


def _settings(run: EngineRun) -> tuple[EngineResource, Any]:
    app = run.one("WebApp")
    return app, app.inputs["siteConfig"]["appSettings"]


_CONNECTION_STRING = {
    "name": "AzureWebJobsStorage",
    "value": "DefaultEndpointsProtocol=https;AccountName=cchost;AccountKey=abc==",
}


def _secret_setting(run: EngineRun) -> EngineResource:
    app, settings = _settings(run)
    if settings != UNKNOWN:
        settings.append(_CONNECTION_STRING)
    return app


def _no_issuer(run: EngineRun) -> EngineResource:
    app, settings = _settings(run)
    if settings != UNKNOWN:
        settings[:] = [pair for pair in settings if pair["name"] != "CLAIMCHECK_AUTH_ISSUER"]
    return app


def _permissions(run: EngineRun, **change: list[str]) -> EngineResource:
    definition = run.one("RoleDefinition")
    (permission,) = definition.inputs["permissions"]
    _set(definition, "permissions", [{**permission, **change}])
    return definition


def _sas_rule(run: EngineRun) -> EngineResource:
    queue = run.of_type("Queue")[0]
    inputs = {"rights": ["Listen"], "queueName": queue.inputs["queueName"], "authorizationRuleName": "listen"}
    return _add(run, queue, "azure-native:servicebus:QueueAuthorizationRule", "listen", inputs)


def _evidence(run: EngineRun) -> EngineResource:
    return run.one("BlobContainer", "evidence")


def _no_worm_policy(run: EngineRun) -> EngineResource:
    run.resources = [r for r in run.resources if not r.type.endswith(":BlobContainerImmutabilityPolicy")]
    return _evidence(run)


def _worm_on_another_container(run: EngineRun) -> EngineResource:
    """One policy, taken from the shared payload container: the evidence container stays unlocked."""
    policy = run.one("BlobContainerImmutabilityPolicy")
    policy.property_dependencies["containerName"] = [run.one("BlobContainer", "payloads").urn]
    return _evidence(run)


def _versioning_off(run: EngineRun) -> EngineResource:
    container = _evidence(run)
    _set(container, "immutableStorageWithVersioning", {"enabled": False})
    return container


def _assignment(run: EngineRun, key: str) -> EngineResource:
    (match,) = [r for r in run.of_type("RoleAssignment") if r.name.endswith(f"-access-{key}")]
    return match


def _payload_account(run: EngineRun) -> EngineResource:
    return next(r for r in run.of_type("StorageAccount") if not r.name.startswith("cchost"))


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    stack: str
    craft: Callable[[EngineRun], EngineResource]  # returns the resource the diagnostic names
    first_preview: bool  # reported in a first preview too
    shipped: bool = True  # a change of the program as shipped (False: a shape it could register)


CASES = [
    Case(
        "servicebus-entra-only-tls12",
        "local-auth-on",
        "dev",
        lambda run: _set(run.one("Namespace"), "disableLocalAuth", False),
        True,
    ),
    Case(
        "servicebus-entra-only-tls12",
        "local-auth-computed",
        "dev",
        lambda run: _set(run.one("Namespace"), "disableLocalAuth", UNKNOWN),
        True,
        shipped=False,
    ),
    Case("servicebus-no-sas-rules", "queue-sas-rule", "dev", _sas_rule, True),
    Case(
        "storage-entra-only-private-tls12",
        "shared-key-on",
        "dev",
        lambda run: _set(_payload_account(run), "allowSharedKeyAccess", True),
        True,
    ),
    Case(
        "storage-private-containers",
        "public-blobs",
        "dev",
        lambda run: _set(run.one("BlobContainer", "payloads"), "publicAccess", "Blob"),
        True,
    ),
    Case("functions-no-secrets-in-app-settings", "connection-string", "dev", _secret_setting, True),
    Case("functions-no-anonymous-routes", "no-issuer", "dev", _no_issuer, True),
    Case(
        "rbac-custom-roles-narrow",
        "wildcard-data-actions",
        "dev",
        lambda run: _permissions(
            run, dataActions=["Microsoft.Storage/storageAccounts/blobServices/containers/blobs/*"]
        ),
        True,
    ),
    Case(
        "rbac-custom-roles-narrow",
        "management-actions",
        "dev",
        lambda run: _permissions(run, actions=["Microsoft.Storage/storageAccounts/listKeys/action"]),
        True,
    ),
    Case(
        "rbac-custom-roles-narrow",
        "assignable-at-subscription",
        "dev",
        lambda run: _set(run.one("RoleDefinition"), "assignableScopes", ["/subscriptions/sub"]),
        True,
    ),
    Case(
        "production-data-services-private",
        "public-namespace",
        "prod",
        lambda run: _set(run.one("Namespace"), "publicNetworkAccess", "Enabled"),
        True,
    ),
    Case("production-evidence-immutable", "no-worm-policy", "prod", _no_worm_policy, True),
    Case(
        "production-evidence-immutable", "worm-on-another-container", "prod", _worm_on_another_container, True
    ),
    Case("production-evidence-immutable", "versioning-off", "prod", _versioning_off, True),
    Case(
        "rbac-data-roles-at-entity-scope",
        "servicebus-role-on-namespace",
        "dev",
        lambda run: _scope_on(_assignment(run, "app-own-documents"), run.one("Namespace")),
        True,
    ),
    Case(
        "rbac-data-roles-at-entity-scope",
        "custom-data-role-on-payload-account",
        "dev",
        lambda run: _scope_on(_assignment(run, "app-payload-blobs"), _payload_account(run)),
        True,
    ),
    Case(
        "rbac-data-roles-at-entity-scope",
        "host-role-on-payload-account",
        "dev",
        lambda run: _scope_on(_assignment(run, "app-host-storage"), _payload_account(run)),
        True,
    ),
    Case(
        "rbac-data-roles-at-entity-scope",
        "table-role-on-resource-group",
        "prod",
        lambda run: _scope_on(_assignment(run, "app-table-payloadregistry"), run.one("ResourceGroup")),
        True,
    ),
]


def test_every_rule_has_crafted_violations() -> None:
    """A new rule without a case fails here; FIRST_PREVIEW says a rule enforces in a first preview
    exactly when one of its cases on the program as shipped is reported there."""
    assert {case.rule for case in CASES} == set(RULES)
    as_shipped = {case.rule: case.first_preview for case in CASES if case.shipped}
    assert as_shipped == FIRST_PREVIEW


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.rule}:{case.name}")
def test_crafted_violation_is_reported_at_its_level(packs: PackPool, case: Case, phase: str) -> None:
    """The one crafted violation, and nothing else, is reported at the rule's enforcement level and
    on the resource at fault; in a first preview only where FIRST_PREVIEW says the rule enforces."""
    run = engine_run(case.stack, preview=PHASES[phase]).copy()
    at_fault = case.craft(run)
    pack = packs(case.stack, dry_run=run.preview)
    reported = {(d.policy, d.level, d.urn) for d in _diagnostics(packs, run)}
    expected = {(case.rule, pack.levels[case.rule], at_fault.urn)}
    assert reported == (expected if case.first_preview or not run.preview else set())
