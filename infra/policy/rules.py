"""The policy pack's checks as pure functions over a resource's properties (camelCase, as Pulumi
passes them), so each rule is unit-tested without the Pulumi engine. Each returns violation messages.

The pack (infra/policy/pack.py) hands every rule plain values: the engine's property proxies become
dicts and lists, and a value the engine does not know yet (during `pulumi preview`) becomes UNKNOWN.
Resource rules see a resource's inputs; stack rules see every resource's outputs (what the provider
returns: no input-only properties, no WebApp siteConfig) with the engine's dependency graph, which
says where a value comes from even while the value itself is unknown. A property a rule needs as a
literal (a security switch) is a violation while unknown, so the preview checks it before anything
is created; a value that can only be known once its resource exists (an id, a generated name) is
judged when known, or through the resource it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.roles import CUSTOM_ROLES, DATA_ROLES, SERVICE_BUS_DATA_ROLES, custom_role_guid, role_guid

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the Pulumi engine's "computed" sentinel
TLS_1_2_OR_LATER = ("1.2", "1.3", "TLS1_2", "TLS1_3")
_LITERAL = "unknown until another resource exists; set it as a literal so the preview can check it"

# Credentials or credential-bearing material that must never sit in an app setting.
_SECRET_MARKERS = re.compile(
    r"accountkey=|sharedaccesskey(name)?=|sharedaccesssignature=|defaultendpointsprotocol=|"
    r"[?&]sig=|password=|pwd=",
    re.IGNORECASE,
)
# Bare connection names the Functions host would read as connection strings.
_CONNECTION_STRING_SETTINGS = ("AzureWebJobsStorage", "AzureWebJobsServiceBus")


def is_unknown(value: object) -> bool:
    return value == UNKNOWN


def _shown(value: object) -> str:
    """A value for a message: the sentinel is explained, never printed."""
    return _LITERAL if is_unknown(value) else f"got {value!r}"


def _known_list(value: object) -> list[Any] | None:
    """A known list's items (the engine's list proxy is a Sequence, not a list); None when unknown
    or not a list. Absent is an empty list."""
    if value is None:
        return []
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return None


def _known_str(value: object) -> str | None:
    return value if isinstance(value, str) and not is_unknown(value) else None


@dataclass(frozen=True)
class StackResource:
    """One resource of a stack policy: its outputs, and where the engine says they come from."""

    kind: str
    props: Mapping[str, Any]
    urn: str = ""
    name: str = ""  # the Pulumi (logical) name
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def stack_resources(
    resources: Iterable[StackResource | tuple[str, Mapping[str, Any]]],
) -> list[StackResource]:
    """Stack rules also take (type, properties) pairs: a list of resources without the engine's graph."""
    return [
        resource if isinstance(resource, StackResource) else StackResource(resource[0], resource[1])
        for resource in resources
    ]


def servicebus_namespace_violations(props: Mapping[str, Any]) -> list[str]:
    problems = []
    if props.get("disableLocalAuth") is not True:
        problems.append(
            "Service Bus namespace must set disableLocalAuth: true (no SAS keys; Entra ID only), "
            + _shown(props.get("disableLocalAuth"))
        )
    if props.get("minimumTlsVersion") not in TLS_1_2_OR_LATER:
        problems.append(
            "Service Bus namespace must set minimumTlsVersion '1.2', "
            + _shown(props.get("minimumTlsVersion"))
        )
    return problems


# Environments whose data services must be private (the `environment` tag infra/tags.py sets).
PRODUCTION_ENVIRONMENTS = ("prod", "production")
DATA_SERVICE_TYPES = ("azure-native:servicebus:Namespace", "azure-native:storage:StorageAccount")


def _is_production(props: Mapping[str, Any]) -> bool:
    tags = props.get("tags")
    return isinstance(tags, Mapping) and tags.get("environment") in PRODUCTION_ENVIRONMENTS


def production_public_access_violations(props: Mapping[str, Any]) -> list[str]:
    """A data service of a production stack (tag environment=prod) refuses public network access."""
    access = props.get("publicNetworkAccess")
    if not _is_production(props) or access == "Disabled":
        return []
    return [
        "a production stack's data service must set publicNetworkAccess: Disabled (private endpoints "
        f"only, claimcheck:privateNetworking), {_shown(access)}"
    ]


# The purpose whose payloads are evidence (infra/topology's EVIDENCE_PURPOSE) and the container metadata
# key naming the purposes whose payloads a container holds (infra/components/storage.py writes it).
EVIDENCE_PURPOSE = "evidence-archive"
PURPOSES_METADATA = "claimcheckpurposes"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_CONTAINER = "azure-native:storage:BlobContainer"
IMMUTABILITY_POLICY = "azure-native:storage:BlobContainerImmutabilityPolicy"


def _container_purposes(props: Mapping[str, Any]) -> set[str] | None:
    """The purposes a container's metadata names; None while unknown."""
    metadata = props.get("metadata")
    if is_unknown(metadata):
        return None
    named = metadata.get(PURPOSES_METADATA, "") if isinstance(metadata, Mapping) else ""
    return None if is_unknown(named) else set(str(named).split())


def _container_name(resource: StackResource) -> str | None:
    """A container's ARM name: the `name` output, or the `containerName` input."""
    return _known_str(resource.props.get("name")) or _known_str(resource.props.get("containerName"))


def production_evidence_worm_violations(
    resources: Iterable[StackResource | tuple[str, Mapping[str, Any]]],
) -> list[tuple[int | None, str]]:
    """(index of the container or None, problem): in a production stack (a storage account tagged
    environment=prod) the container holding the evidence purpose's payloads has version-level
    immutability and a default time-based policy.

    A policy locks the container its `containerName` is taken from: the engine's property dependency
    (outputs carry no containerName), or with plain inputs the name itself."""
    listed = stack_resources(resources)
    if not any(r.kind == STORAGE_ACCOUNT and _is_production(r.props) for r in listed):
        return []
    locked: set[str] = set()
    for policy in listed:
        days = policy.props.get("immutabilityPeriodSinceCreationInDays")
        # Numbers arrive as floats from the engine (protobuf Struct).
        positive = isinstance(days, int | float) and not isinstance(days, bool) and days > 0
        if policy.kind == IMMUTABILITY_POLICY and (is_unknown(days) or positive):
            locked.update(policy.property_dependencies.get("containerName", ()))
            locked.update(filter(None, [_known_str(policy.props.get("containerName"))]))
    containers = [(index, r) for index, r in enumerate(listed) if r.kind == BLOB_CONTAINER]
    evidence = [(i, r) for i, r in containers if EVIDENCE_PURPOSE in (_container_purposes(r.props) or ())]
    if not evidence:
        if any(_container_purposes(r.props) is None for _, r in containers):
            return []  # a container's purposes are not known yet
        return [
            (
                None,
                f"a production stack keeps {EVIDENCE_PURPOSE!r} payloads in a container of their own, "
                f"marked with metadata {PURPOSES_METADATA!r} (topology.bindings.purposeContainers)",
            )
        ]
    problems: list[tuple[int | None, str]] = []
    for index, container in evidence:
        name = _container_name(container) or container.name
        versioning = container.props.get("immutableStorageWithVersioning")
        enabled = versioning.get("enabled") if isinstance(versioning, Mapping) else versioning
        if enabled is not True:
            problems.append(
                (
                    index,
                    f"a production stack's evidence container {name!r} must enable version-level "
                    "immutability at creation (claimcheck:evidenceImmutability)"
                    + ("" if not is_unknown(enabled) else f", {_LITERAL}"),
                )
            )
        elif container.urn not in locked and _container_name(container) not in locked:
            problems.append(
                (
                    index,
                    f"a production stack's evidence container {name!r} needs a default time-based "
                    "immutability policy whose containerName is that container's name "
                    "(claimcheck:evidenceImmutability)",
                )
            )
    return problems


def storage_account_violations(props: Mapping[str, Any]) -> list[str]:
    required: dict[str, tuple[object, str]] = {
        "allowSharedKeyAccess": (False, "shared-key (account key and SAS) access off"),
        "allowBlobPublicAccess": (False, "anonymous blob access off"),
        "allowCrossTenantReplication": (False, "cross-tenant object replication off"),
        "defaultToOAuthAuthentication": (True, "Entra ID (OAuth) as the default authentication"),
    }
    problems = [
        f"storage account must set {key}: {str(expected).lower()} ({why})"
        + ("" if not is_unknown(props.get(key)) else f", {_LITERAL}")
        for key, (expected, why) in required.items()
        if props.get(key) is not expected
    ]
    https = props.get("enableHttpsTrafficOnly")
    if https is False or is_unknown(https):
        problems.append(
            f"storage account must not allow plain HTTP (enableHttpsTrafficOnly: true), {_shown(https)}"
        )
    if props.get("minimumTlsVersion") not in TLS_1_2_OR_LATER:
        problems.append(
            f"storage account must set minimumTlsVersion 'TLS1_2', {_shown(props.get('minimumTlsVersion'))}"
        )
    return problems


def blob_container_violations(props: Mapping[str, Any]) -> list[str]:
    access = props.get("publicAccess")
    if access not in (None, "None"):
        return [f"blob container must be private (publicAccess: None), {_shown(access)}"]
    return []


def app_settings_violations(settings: Mapping[str, object]) -> list[str]:
    """Settings that carry (or would be read as) a credential: keys, SAS, connection strings."""
    problems = []
    for name, value in settings.items():
        if name in _CONNECTION_STRING_SETTINGS:
            problems.append(
                f"app setting {name!r} is a connection string; use identity-based "
                f"{name}__accountName / __fullyQualifiedNamespace settings"
            )
        elif isinstance(value, str) and not is_unknown(value) and _SECRET_MARKERS.search(value):
            problems.append(
                f"app setting {name!r} carries a key, SAS token or connection string; use a "
                "managed identity (the value is not shown)"
            )
    return problems


def _app_settings(props: Mapping[str, Any]) -> dict[str, object] | None:
    """A WebApp's app settings from its inputs (outputs never carry siteConfig); None while the list
    is unknown. A setting whose name is unknown is left out."""
    site_config = props.get("siteConfig")
    if is_unknown(site_config):
        return None
    pairs = _known_list(site_config.get("appSettings") if isinstance(site_config, Mapping) else None)
    if pairs is None:
        return None
    return {
        name: pair.get("value")
        for pair in pairs
        if isinstance(pair, Mapping) and (name := _known_str(pair.get("name"))) is not None
    }


def web_app_violations(props: Mapping[str, Any]) -> list[str]:
    settings = _app_settings(props)
    return [] if settings is None else app_settings_violations(settings)


# The Function App's token gate (claimcheck.auth): without these settings its HTTP routes would be open.
TOKEN_GATE_SETTINGS = ("CLAIMCHECK_AUTH_ISSUER", "CLAIMCHECK_AUTH_AUDIENCES", "CLAIMCHECK_AUTH_JWKS_URI")


def token_gate_violations(props: Mapping[str, Any]) -> list[str]:
    """No HTTP route with anonymous access, as the program can see it: a Function App must carry its
    in-app token gate's settings (issuer and JWKS over HTTPS, an audience). The routes themselves are
    code (function_app.py), checked by a test that every route answers 401 without a token."""
    kind = props.get("kind")
    settings = _app_settings(props)
    if not isinstance(kind, str) or "functionapp" not in kind.lower() or settings is None:
        return []
    problems = []
    for name in TOKEN_GATE_SETTINGS:
        value = settings.get(name)
        if is_unknown(value):
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(
                f"app setting {name!r} is missing: the app's HTTP routes would accept anonymous "
                "calls (every route needs an Entra ID bearer token)"
            )
        elif name != "CLAIMCHECK_AUTH_AUDIENCES" and not value.startswith("https://"):
            problems.append(f"app setting {name!r} must be an https URL (tokens are verified against it)")
    return problems


WEB_APP = "azure-native:web:WebApp"
RESOURCE_GROUP = "azure-native:resources:ResourceGroup"
SERVICE_BUS_NAMESPACE = "azure-native:servicebus:Namespace"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
ROLE_DEFINITION = "azure-native:authorization:RoleDefinition"


@dataclass(frozen=True)
class _HostAccounts:
    """The Function Apps' own storage accounts: account-wide host roles (AzureWebJobsStorage) are
    expected there. Known by name from a WebApp's inputs (AzureWebJobsStorage__accountName), or as
    the accounts its functionAppConfig (the deployment package) is taken from, the engine's record in
    AnalyzeStack, whose WebApp outputs carry no app settings."""

    names: frozenset[str]
    urns: frozenset[str]


def _host_accounts(listed: Sequence[StackResource], by_urn: Mapping[str, StackResource]) -> _HostAccounts:
    names: set[str] = set()
    urns: set[str] = set()
    for app in (r for r in listed if r.kind == WEB_APP):
        account = _known_str((_app_settings(app.props) or {}).get("AzureWebJobsStorage__accountName"))
        names.update([account.lower()] if account else [])
        for urn in app.property_dependencies.get("functionAppConfig", ()):
            source = by_urn.get(urn)
            if source is not None and source.kind == STORAGE_ACCOUNT:
                urns.add(urn)
                names.update(filter(None, [(_known_str(source.props.get("name")) or "").lower()]))
    return _HostAccounts(frozenset(names), frozenset(urns))


_BROAD_SCOPE = re.compile(
    r"^(/|/subscriptions/[^/]+/?|/subscriptions/[^/]+/resourcegroups/[^/]+/?|"
    r"/providers/microsoft\.management/managementgroups/[^/]+/?)$",
    re.IGNORECASE,
)
_NAMESPACE_SCOPE = re.compile(r"/providers/microsoft\.servicebus/namespaces/[^/]+/?$", re.IGNORECASE)
_ACCOUNT_SCOPE = re.compile(
    r"/providers/microsoft\.storage/storageaccounts/(?P<account>[^/]+)(/(blob|table|queue)services/default)?/?$",
    re.IGNORECASE,
)


def _broad_scope_problem(role: str, scope: str) -> str:
    return (
        f"data role {role} assigned at subscription/resource-group scope {scope!r}; assign it on "
        "the queue, topic, container or table"
    )


def _namespace_problem(role: str, scope: str) -> str:
    return (
        f"Service Bus data role {role} assigned on the whole namespace {scope!r}; assign it on the "
        "queue or topic"
    )


def _account_problem(role: str, scope: str) -> str:
    return (
        f"storage data role {role} assigned on the whole account {scope!r}; assign it on the "
        "container or table"
    )


def _scope_id_problem(role: str, scope: str, hosts: _HostAccounts) -> str | None:
    """A data role at a scope given as an ARM id."""
    if _BROAD_SCOPE.match(scope):
        return _broad_scope_problem(role, scope)
    if role in SERVICE_BUS_DATA_ROLES and _NAMESPACE_SCOPE.search(scope):
        return _namespace_problem(role, scope)
    account = _ACCOUNT_SCOPE.search(scope)
    if account and account.group("account").lower() not in hosts.names:
        return _account_problem(role, scope)
    return None


def _scope_resource_problem(role: str, target: StackResource, hosts: _HostAccounts) -> str | None:
    """A data role at a scope not known yet (a first preview), judged by the one resource it is that
    resource's id of, as the engine's property dependency says."""
    scope = f"the id of {target.name or target.kind}"
    if target.kind == RESOURCE_GROUP:
        return _broad_scope_problem(role, scope)
    if target.kind == SERVICE_BUS_NAMESPACE and role in SERVICE_BUS_DATA_ROLES:
        return _namespace_problem(role, scope)
    if target.kind == STORAGE_ACCOUNT and target.urn not in hosts.urns:
        return _account_problem(role, scope)
    return None


_ABOVE_RESOURCE_GROUP = re.compile(
    r"^(/|/subscriptions/[^/]+/?|/providers/microsoft\.management/managementgroups/[^/]+/?)$", re.IGNORECASE
)


def _permission_lists(props: Mapping[str, Any], key: str) -> list[str]:
    """Every known entry of `key` (actions, dataActions, ...) over a role definition's permission
    blocks (an unknown block or entry is left out)."""
    return [
        action
        for permission in _known_list(props.get("permissions")) or []
        if isinstance(permission, Mapping)
        for action in _known_list(permission.get(key)) or []
        if _known_str(action) is not None
    ]


def role_definition_violations(props: Mapping[str, Any]) -> list[str]:
    """A custom role here grants named data actions only, assignable no wider than a resource group."""
    problems = []
    wildcards = [action for action in _permission_lists(props, "dataActions") if "*" in action]
    if wildcards:
        problems.append(f"custom role grants wildcard data actions {wildcards}; name each data action")
    control_plane = _permission_lists(props, "actions")
    if control_plane:
        problems.append(f"custom role grants management actions {control_plane}; data roles only")
    broad = [
        scope
        for scope in _known_list(props.get("assignableScopes")) or []
        if _known_str(scope) is not None and _ABOVE_RESOURCE_GROUP.match(scope)
    ]
    if broad:
        problems.append(
            f"custom role assignable at {broad}; make it assignable in the stack's resource group"
        )
    return problems


def _custom_data_roles(listed: Sequence[StackResource]) -> tuple[frozenset[str], frozenset[str]]:
    """(GUIDs, URNs) of the stack's custom role definitions that grant data actions. A definition's
    GUID is its `name` output (its `roleDefinitionId` input, with plain inputs)."""
    definitions = [
        r for r in listed if r.kind == ROLE_DEFINITION and _permission_lists(r.props, "dataActions")
    ]
    guids = {
        guid.lower()
        for r in definitions
        if (guid := _known_str(r.props.get("name")) or _known_str(r.props.get("roleDefinitionId")))
    }
    return frozenset(guids), frozenset(r.urn for r in definitions if r.urn)


_RESOURCE_GROUP_SCOPE = re.compile(r"^/subscriptions/[^/]+/resourceGroups/[^/]+", re.IGNORECASE)


def _defined_outside_the_stack(scope: str | None) -> frozenset[str]:
    """GUIDs the program's custom data roles have in the resource group of `scope`. A stack with
    `createCustomRoles: false` holds no RoleDefinition (scripts/bootstrap_ci.py defined them, with
    the same deterministic GUIDs), so its assignments are recognised by GUID alone."""
    group = _RESOURCE_GROUP_SCOPE.match(scope) if scope else None
    if group is None:
        return frozenset()
    return frozenset(custom_role_guid(group.group(0), role) for role in CUSTOM_ROLES if role.data_actions)


SAS_RULE_TYPES = (
    "azure-native:servicebus:NamespaceAuthorizationRule",
    "azure-native:servicebus:QueueAuthorizationRule",
    "azure-native:servicebus:TopicAuthorizationRule",
)


def sas_rule_violations(resource_type: str) -> list[str]:
    if resource_type in SAS_RULE_TYPES:
        return [f"{resource_type} creates SAS keys; grant an Entra role on the entity instead"]
    return []


# azure-native v3 type token -> the check for that resource's properties.
RESOURCE_CHECKS = {
    "azure-native:servicebus:Namespace": servicebus_namespace_violations,
    "azure-native:storage:StorageAccount": storage_account_violations,
    "azure-native:storage:BlobContainer": blob_container_violations,
    "azure-native:web:WebApp": web_app_violations,
    "azure-native:authorization:RoleDefinition": role_definition_violations,
}


def stack_role_violations(
    resources: Iterable[StackResource | tuple[str, Mapping[str, Any]]],
) -> list[tuple[int, str]]:
    """(index of the role assignment, problem) for every data role (built-in, or a custom role the stack
    defines with data actions) at a broad scope in the stack.

    While a first preview does not know an assignment's scope (an id) or a custom role's GUID, the
    engine's graph answers: the scope is judged by the resource it is taken from, and an assignment
    that depends on a custom data role's definition holds that role."""
    listed = stack_resources(resources)
    by_urn = {r.urn: r for r in listed if r.urn}
    hosts = _host_accounts(listed, by_urn)
    custom_guids, custom_urns = _custom_data_roles(listed)
    problems = []
    for index, assignment in enumerate(listed):
        if assignment.kind != ROLE_ASSIGNMENT:
            continue
        definition = _known_str(assignment.props.get("roleDefinitionId"))
        scope = _known_str(assignment.props.get("scope"))
        if definition is not None:
            role = role_guid(definition)
            if role not in DATA_ROLES | custom_guids | _defined_outside_the_stack(scope):
                continue
        elif any(dependency in custom_urns for dependency in assignment.dependencies):
            role = "(a custom data role of the stack)"
        else:
            continue
        targets = [by_urn[u] for u in assignment.property_dependencies.get("scope", ()) if u in by_urn]
        if scope is not None:
            problem = _scope_id_problem(role, scope, hosts)
        elif len(targets) == 1:
            problem = _scope_resource_problem(role, targets[0], hosts)
        else:
            problem = None
        if problem is not None:
            problems.append((index, problem))
    return problems
