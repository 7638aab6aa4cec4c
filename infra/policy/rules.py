"""The policy pack's checks as pure functions over a resource's properties (camelCase, as Pulumi
passes them), so each rule is unit-tested without the Pulumi engine. Each returns violation messages.

During `pulumi preview` values not yet known arrive as the engine's unknown sentinel; a check never
fails on an unknown value (the same check runs again, with the value, at `pulumi up`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from infra.roles import DATA_ROLES, SERVICE_BUS_DATA_ROLES, role_guid

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the Pulumi engine's "computed" sentinel
TLS_1_2_OR_LATER = ("1.2", "1.3", "TLS1_2", "TLS1_3")

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


def servicebus_namespace_violations(props: Mapping[str, Any]) -> list[str]:
    problems = []
    if props.get("disableLocalAuth") is not True:
        problems.append("Service Bus namespace must set disableLocalAuth: true (no SAS keys; Entra ID only)")
    if props.get("minimumTlsVersion") not in TLS_1_2_OR_LATER:
        problems.append(
            f"Service Bus namespace must set minimumTlsVersion '1.2', got {props.get('minimumTlsVersion')!r}"
        )
    return problems


# Environments whose data services must be private (the `environment` tag infra/tags.py sets).
PRODUCTION_ENVIRONMENTS = ("prod", "production")
DATA_SERVICE_TYPES = ("azure-native:servicebus:Namespace", "azure-native:storage:StorageAccount")


def production_public_access_violations(props: Mapping[str, Any]) -> list[str]:
    """A data service of a production stack (tag environment=prod) refuses public network access."""
    tags = props.get("tags")
    if is_unknown(tags) or not isinstance(tags, Mapping):
        return []
    environment, access = tags.get("environment"), props.get("publicNetworkAccess")
    if environment not in PRODUCTION_ENVIRONMENTS or is_unknown(access) or access == "Disabled":
        return []
    return [
        f"a production stack's data service must set publicNetworkAccess: Disabled (private endpoints "
        f"only, claimcheck:privateNetworking), got {access!r}"
    ]


# The purpose whose payloads are evidence (infra/topology's EVIDENCE_PURPOSE) and the container metadata
# key naming the purposes whose payloads a container holds (infra/components/storage.py writes it).
EVIDENCE_PURPOSE = "evidence-archive"
PURPOSES_METADATA = "claimcheckpurposes"
BLOB_CONTAINER = "azure-native:storage:BlobContainer"
IMMUTABILITY_POLICY = "azure-native:storage:BlobContainerImmutabilityPolicy"


def _is_production(props: Mapping[str, Any]) -> bool:
    tags = props.get("tags")
    return isinstance(tags, Mapping) and tags.get("environment") in PRODUCTION_ENVIRONMENTS


def production_evidence_worm_violations(
    resources: Iterable[tuple[str, Mapping[str, Any]]],
) -> list[tuple[int | None, str]]:
    """(index of the container or None, problem): in a production stack (a storage account tagged
    environment=prod) the container holding the evidence purpose's payloads has version-level
    immutability and a default time-based policy."""
    listed = list(resources)
    if not any(kind == "azure-native:storage:StorageAccount" and _is_production(p) for kind, p in listed):
        return []
    locked: set[object] = set()
    for kind, props in listed:
        days = props.get("immutabilityPeriodSinceCreationInDays")
        # Numbers arrive as floats from the engine (protobuf Struct).
        positive = isinstance(days, int | float) and not isinstance(days, bool) and days > 0
        if kind == IMMUTABILITY_POLICY and (is_unknown(days) or positive):
            locked.add(props.get("containerName"))
    evidence = [
        (index, props)
        for index, (kind, props) in enumerate(listed)
        if kind == BLOB_CONTAINER
        and isinstance(props.get("metadata"), Mapping)
        and EVIDENCE_PURPOSE in str(props["metadata"].get(PURPOSES_METADATA, "")).split()
    ]
    if not evidence:
        return [
            (
                None,
                f"a production stack keeps {EVIDENCE_PURPOSE!r} payloads in a container of their own, "
                f"marked with metadata {PURPOSES_METADATA!r} (topology.bindings.purposeContainers)",
            )
        ]
    problems: list[tuple[int | None, str]] = []
    for index, props in evidence:
        name = props.get("containerName")
        versioning = props.get("immutableStorageWithVersioning")
        if not (isinstance(versioning, Mapping) and versioning.get("enabled") is True):
            problems.append(
                (
                    index,
                    f"a production stack's evidence container {name!r} must enable version-level "
                    "immutability at creation (claimcheck:evidenceImmutability)",
                )
            )
        elif name not in locked and not any(is_unknown(other) for other in locked):
            problems.append(
                (
                    index,
                    f"a production stack's evidence container {name!r} needs a default time-based "
                    "immutability policy (claimcheck:evidenceImmutability)",
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
        for key, (expected, why) in required.items()
        if props.get(key) is not expected
    ]
    if props.get("enableHttpsTrafficOnly") is False:
        problems.append("storage account must not allow plain HTTP (enableHttpsTrafficOnly: true)")
    if props.get("minimumTlsVersion") not in TLS_1_2_OR_LATER:
        problems.append(
            f"storage account must set minimumTlsVersion 'TLS1_2', got {props.get('minimumTlsVersion')!r}"
        )
    return problems


def blob_container_violations(props: Mapping[str, Any]) -> list[str]:
    access = props.get("publicAccess")
    if access not in (None, "None"):
        return [f"blob container must be private (publicAccess: None), got {access!r}"]
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


def web_app_violations(props: Mapping[str, Any]) -> list[str]:
    site_config = props.get("siteConfig")
    pairs = site_config.get("appSettings") if isinstance(site_config, Mapping) else None
    if not isinstance(pairs, list):
        return []
    settings = {str(pair.get("name")): pair.get("value") for pair in pairs if isinstance(pair, Mapping)}
    return app_settings_violations(settings)


# The Function App's token gate (claimcheck.auth): without these settings its HTTP routes would be open.
TOKEN_GATE_SETTINGS = ("CLAIMCHECK_AUTH_ISSUER", "CLAIMCHECK_AUTH_AUDIENCES", "CLAIMCHECK_AUTH_JWKS_URI")


def token_gate_violations(props: Mapping[str, Any]) -> list[str]:
    """No HTTP route with anonymous access, as the program can see it: a Function App must carry its
    in-app token gate's settings (issuer and JWKS over HTTPS, an audience). The routes themselves are
    code (function_app.py), checked by a test that every route answers 401 without a token."""
    kind = str(props.get("kind", ""))
    if "functionapp" not in kind.lower():
        return []
    site_config = props.get("siteConfig")
    pairs = site_config.get("appSettings") if isinstance(site_config, Mapping) else None
    settings = {str(pair.get("name")): pair.get("value") for pair in pairs or [] if isinstance(pair, Mapping)}
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


def host_storage_accounts(web_apps: Iterable[Mapping[str, Any]]) -> set[str]:
    """Accounts that Function Apps use as AzureWebJobsStorage: account-wide host roles are expected there."""
    accounts = set()
    for props in web_apps:
        site_config = props.get("siteConfig")
        pairs = site_config.get("appSettings") if isinstance(site_config, Mapping) else None
        for pair in pairs if isinstance(pairs, list) else []:
            if isinstance(pair, Mapping) and pair.get("name") == "AzureWebJobsStorage__accountName":
                accounts.add(str(pair.get("value")).lower())
    return accounts


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


def role_assignment_violations(
    props: Mapping[str, Any], host_accounts: set[str], data_roles: frozenset[str] = DATA_ROLES
) -> list[str]:
    """A data role (Service Bus or Storage data) must sit on an entity, not on a broad scope."""
    scope, definition = props.get("scope"), props.get("roleDefinitionId")
    if (
        not isinstance(scope, str)
        or not isinstance(definition, str)
        or is_unknown(scope)
        or is_unknown(definition)
    ):
        return []
    role = role_guid(definition)
    if role not in data_roles:
        return []
    if _BROAD_SCOPE.match(scope):
        return [
            f"data role {role} assigned at subscription/resource-group scope {scope!r}; assign it on "
            "the queue, topic, container or table"
        ]
    if role in SERVICE_BUS_DATA_ROLES and _NAMESPACE_SCOPE.search(scope):
        return [
            f"Service Bus data role {role} assigned on the whole namespace {scope!r}; assign it on the "
            "queue or topic"
        ]
    account = _ACCOUNT_SCOPE.search(scope)
    if account and account.group("account").lower() not in host_accounts:
        return [
            f"storage data role {role} assigned on the whole account {scope!r}; assign it on the "
            "container or table"
        ]
    return []


_ABOVE_RESOURCE_GROUP = re.compile(
    r"^(/|/subscriptions/[^/]+/?|/providers/microsoft\.management/managementgroups/[^/]+/?)$", re.IGNORECASE
)


def _permission_lists(props: Mapping[str, Any], key: str) -> list[str]:
    """Every entry of `key` (actions, dataActions, ...) over a role definition's permission blocks."""
    permissions = props.get("permissions")
    if not isinstance(permissions, list):
        return []  # absent, or unknown during preview
    return [
        str(action)
        for permission in permissions
        if isinstance(permission, Mapping)
        for action in permission.get(key) or []
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
    scopes = props.get("assignableScopes")
    broad = (
        [scope for scope in scopes if isinstance(scope, str) and _ABOVE_RESOURCE_GROUP.match(scope)]
        if isinstance(scopes, list)
        else []
    )  # not a list: unknown during preview
    if broad:
        problems.append(
            f"custom role assignable at {broad}; make it assignable in the stack's resource group"
        )
    return problems


def custom_data_roles(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> frozenset[str]:
    """GUIDs of the stack's custom role definitions that grant data actions."""
    return frozenset(
        str(props["roleDefinitionId"]).lower()
        for kind, props in resources
        if kind == "azure-native:authorization:RoleDefinition"
        and isinstance(props.get("roleDefinitionId"), str)
        and not is_unknown(props["roleDefinitionId"])
        and _permission_lists(props, "dataActions")
    )


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


def stack_role_violations(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[tuple[int, str]]:
    """(index of the role assignment, problem) for every data role (built-in, or a custom role the stack
    defines with data actions) at a broad scope in the stack."""
    listed = list(resources)
    host_accounts = host_storage_accounts(
        props for kind, props in listed if kind == "azure-native:web:WebApp"
    )
    data_roles = DATA_ROLES | custom_data_roles(listed)
    return [
        (index, problem)
        for index, (kind, props) in enumerate(listed)
        if kind == "azure-native:authorization:RoleAssignment"
        for problem in role_assignment_violations(props, host_accounts, data_roles)
    ]
