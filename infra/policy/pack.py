"""Wires the pure rules (infra/policy/rules.py) to azure-native v3 resource types."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from infra.policy import rules

ResourceValidate = Callable[[ResourceValidationArgs, ReportViolation], None]


def _for_type(resource_type: str) -> ResourceValidate:
    check: Callable[[Mapping[str, Any]], list[str]] = rules.RESOURCE_CHECKS[resource_type]

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type == resource_type:
            for problem in check(args.props):
                report_violation(problem, None)

    return validate


def _no_anonymous_routes(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type == "azure-native:web:WebApp":
        for problem in rules.token_gate_violations(args.props):
            report_violation(problem, None)


def _no_sas_rules(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for problem in rules.sas_rule_violations(args.resource_type):
        report_violation(problem, None)


def _data_roles_at_entity_scope(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    resources = args.resources
    for index, problem in rules.stack_role_violations((r.resource_type, r.props) for r in resources):
        report_violation(problem, resources[index].urn)


def _production_data_services_private(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type in rules.DATA_SERVICE_TYPES:
        for problem in rules.production_public_access_violations(args.props):
            report_violation(problem, None)


def _production_evidence_immutable(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    resources = args.resources
    listed = ((r.resource_type, r.props) for r in resources)
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
