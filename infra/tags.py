"""Tags on every Azure resource that takes them: environment, owner and cost center from stack config.

A resource transformation does the tagging, passed to each top-level declaration of the program; Pulumi
hands a parent's transformations to its children, so every resource a component declares inherits it.
`TAGGED_TYPES` lists the resource types ARM tags; `UNTAGGED_TYPES` the ones it cannot (child entities,
role assignments, settings of another resource, Entra objects). tests/infra/test_tags.py fails when the
program declares a type in neither list, so a new resource type is classified instead of forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

TAGGED_TYPES = frozenset(
    {
        "azure-native:resources:ResourceGroup",
        "azure-native:servicebus:Namespace",
        "azure-native:storage:StorageAccount",
        "azure-native:web:AppServicePlan",
        "azure-native:web:WebApp",
        "azure-native:managedidentity:UserAssignedIdentity",
        "azure-native:operationalinsights:Workspace",
        "azure-native:applicationinsights:Component",
        "azure-native:monitor:ActionGroup",
        "azure-native:monitor:MetricAlert",
        "azure-native:monitor:ScheduledQueryRule",
        "azure-native:network:VirtualNetwork",
        "azure-native:network:PrivateEndpoint",
        "azure-native:network:NetworkSecurityGroup",
        "azure-native:privatedns:PrivateZone",
        "azure-native:privatedns:VirtualNetworkLink",
        "azure-native:monitor:PrivateLinkScope",
    }
)
# Entities inside a resource (queues, containers, tables, rules), extension resources without tags
# (role assignments and definitions, diagnostic settings), settings of a parent resource, and Entra ID
# objects (azuread, not ARM).
UNTAGGED_TYPES = frozenset(
    {
        "azure-native:servicebus:Queue",
        "azure-native:servicebus:Topic",
        "azure-native:servicebus:Subscription",
        "azure-native:servicebus:Rule",
        "azure-native:servicebus:DefaultRule",
        "azure-native:servicebus:NamespaceNetworkRuleSet",
        "azure-native:storage:BlobContainer",
        "azure-native:storage:BlobServiceProperties",
        "azure-native:storage:ManagementPolicy",
        "azure-native:storage:Table",
        "azure-native:storage:BlobContainerImmutabilityPolicy",
        "azure-native:web:WebAppFtpAllowed",
        "azure-native:web:WebAppScmAllowed",
        "azure-native:authorization:RoleAssignment",
        "azure-native:authorization:RoleDefinition",
        "azure-native:monitor:DiagnosticSetting",
        "azure-native:network:Subnet",
        "azure-native:network:PrivateDnsZoneGroup",
        "azure-native:monitor:PrivateLinkScopedResource",
        "azuread:index/applicationRegistration:ApplicationRegistration",
        "azuread:index/applicationAppRole:ApplicationAppRole",
        "azuread:index/applicationIdentifierUri:ApplicationIdentifierUri",
        "azuread:index/servicePrincipal:ServicePrincipal",
        "azuread:index/appRoleAssignment:AppRoleAssignment",
    }
)


def stack_tags(environment: str, owner: str, cost_center: str) -> dict[str, str]:
    return {"environment": environment, "owner": owner, "costCenter": cost_center}


def tagging(tags: Mapping[str, str]) -> pulumi.ResourceTransformation:
    """A transformation that sets `tags` on each resource of a tagged type (its own tags win)."""

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if args.type_ not in TAGGED_TYPES:
            return None
        own = args.props.get("tags") or {}
        if not isinstance(own, Mapping):  # an Output: the resource chose its tags itself
            return None
        return pulumi.ResourceTransformationResult({**args.props, "tags": {**tags, **own}}, args.opts)

    return transform
