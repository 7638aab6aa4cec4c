"""Wires the pure rules (infra/policy/rules.py) to azure-native v3 resource types.

The engine hands a policy its properties as pulumi_policy's proxies (Mapping and Sequence, not dict
and list), which raise UnknownValueError on a value not known yet; the SDK then turns the whole
policy into an advisory "can't run during preview". `plain` reads each value once instead, unknowns
as rules.UNKNOWN, so every rule judges what is known and enforces during a first preview too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from infra.policy import rules


def plain(value: object) -> Any:
    """The engine's property proxies as dicts and lists, each unknown value as rules.UNKNOWN."""

    def read(container: Any, key: Any) -> Any:
        try:
            return plain(container[key])
        except UnknownValueError:
            return rules.UNKNOWN

    if isinstance(value, Mapping):
        return {key: read(value, key) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [read(value, index) for index in range(len(value))]
    return value


def _stack_resource(resource: PolicyResource) -> rules.StackResource:
    return rules.StackResource(
        kind=resource.resource_type,
        props=plain(resource.props),
        urn=resource.urn,
        name=resource.name,
        dependencies=tuple(dependency.urn for dependency in resource.dependencies),
        property_dependencies={
            key: tuple(dependency.urn for dependency in dependencies)
            for key, dependencies in resource.property_dependencies.items()
        },
    )


ResourceValidate = Callable[[ResourceValidationArgs, ReportViolation], None]


def _for_type(resource_type: str) -> ResourceValidate:
    check: Callable[[Mapping[str, Any]], list[str]] = rules.RESOURCE_CHECKS[resource_type]

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type == resource_type:
            for problem in check(plain(args.props)):
                report_violation(problem, None)

    return validate


def _no_anonymous_routes(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == "azure-native:web:WebApp":
        for problem in rules.token_gate_violations(plain(args.props)):
            report_violation(problem, None)


def _no_sas_rules(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for problem in rules.sas_rule_violations(args.resource_type):
        report_violation(problem, None)


def _data_roles_at_entity_scope(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    resources = args.resources
    for index, problem in rules.stack_role_violations(_stack_resource(r) for r in resources):
        report_violation(problem, resources[index].urn)


def _production_data_services_private(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type in rules.DATA_SERVICE_TYPES:
        for problem in rules.production_public_access_violations(plain(args.props)):
            report_violation(problem, None)


def _production_evidence_immutable(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    resources = args.resources
    listed = (_stack_resource(r) for r in resources)
    for index, problem in rules.production_evidence_worm_violations(listed):
        report_violation(problem, None if index is None else resources[index].urn)


def build_policy_pack() -> PolicyPack:
    return PolicyPack(
        name="claimcheck-security",
        enforcement_level=EnforcementLevel.MANDATORY,
        policies=[
            ResourceValidationPolicy(
                "servicebus-entra-only-tls12",
                "Service Bus namespaces disable SAS (local auth) and require TLS 1.2.",
                _for_type("azure-native:servicebus:Namespace"),
            ),
            ResourceValidationPolicy(
                "servicebus-no-sas-rules",
                "No SAS authorization rules on namespaces, queues or topics.",
                _no_sas_rules,
            ),
            ResourceValidationPolicy(
                "storage-entra-only-private-tls12",
                "Storage accounts: no shared key, no public blobs, HTTPS and TLS 1.2, "
                "no cross-tenant replication, OAuth by default.",
                _for_type("azure-native:storage:StorageAccount"),
            ),
            ResourceValidationPolicy(
                "storage-private-containers",
                "Blob containers are private.",
                _for_type("azure-native:storage:BlobContainer"),
            ),
            ResourceValidationPolicy(
                "functions-no-secrets-in-app-settings",
                "App settings hold no connection strings, account keys or SAS.",
                _for_type("azure-native:web:WebApp"),
            ),
            ResourceValidationPolicy(
                "functions-no-anonymous-routes",
                "Every HTTP route needs an Entra ID bearer token: a Function App "
                "carries its token gate's issuer, audiences and JWKS URI.",
                _no_anonymous_routes,
            ),
            ResourceValidationPolicy(
                "rbac-custom-roles-narrow",
                "Custom roles name their data actions (no wildcard, no management "
                "actions) and are assignable no wider than a resource group.",
                _for_type("azure-native:authorization:RoleDefinition"),
            ),
            ResourceValidationPolicy(
                "production-data-services-private",
                "In a stack tagged environment=prod, the Service Bus namespace and "
                "the storage accounts disable public network access.",
                _production_data_services_private,
            ),
            StackValidationPolicy(
                "production-evidence-immutable",
                "In a stack tagged environment=prod, the container holding the evidence-archive "
                "purpose's payloads has version-level immutability and a default time-based policy.",
                _production_evidence_immutable,
            ),
            StackValidationPolicy(
                "rbac-data-roles-at-entity-scope",
                "Data roles sit on the queue, topic, container or table, never on a "
                "namespace, account, resource group or subscription.",
                _data_roles_at_entity_scope,
            ),
        ],
    )
