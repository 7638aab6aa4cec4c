"""Azure Resource Manager's service-side rules this stack can hit, as data.

`pulumi preview` and the Pulumi mocks accept any property bag; ARM and the resource providers then
refuse some at `pulumi up` (ARM 51021 for Flex Consumption site config, a Premium-only feature on a
Standard namespace, ...) or silently run something other than what was declared (always-ready
instances on a zone-redundant plan). Each row below is one documented restriction: the resource type
it applies to, a predicate over that resource's inputs as the program registers them (the related
resources it names looked up by id), the message, and the Microsoft page or sample it comes from.

tests/infra/test_arm_rules.py checks every row over the resources both stacks register under mocks
(zero violations) and feeds each row a crafted violating resource (so no row is dead); the mocks
themselves (tests/infra/pulumi_harness.run_program) refuse a run that breaks a row, as ARM would, so
no infra test passes on a shape `pulumi up` would be refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import isodate
from pulumi_azure_native import authorization

from infra.stack_config import FLEX_MAXIMUM_INSTANCES, INSTANCE_MEMORY_MB, ZONE_REDUNDANT_MIN_ALWAYS_READY
from infra.topology.validation import DUPLICATE_WINDOW_RANGE, LOCK_DURATION_RANGE

WEB_APP = "azure-native:web:WebApp"
PLAN = "azure-native:web:AppServicePlan"
SUBNET = "azure-native:network:Subnet"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
BLOB_CONTAINER = "azure-native:storage:BlobContainer"
MANAGEMENT_POLICY = "azure-native:storage:ManagementPolicy"
NAMESPACE = "azure-native:servicebus:Namespace"
QUEUE = "azure-native:servicebus:Queue"
TOPIC = "azure-native:servicebus:Topic"
SUBSCRIPTION = "azure-native:servicebus:Subscription"
PRIVATE_ENDPOINT = "azure-native:network:PrivateEndpoint"
METRIC_ALERT = "azure-native:monitor:MetricAlert"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"

# Site-config properties Flex Consumption sites refuse (ARM 51021, "... for Flex Consumption sites is
# invalid"): the five of the verbatim list quoted in AVM #360, LinuxFxVersion (AVM #283) and
# FunctionAppScaleLimit (azure-functions-host #10643). Older regional stamps ignore them; newer ones
# refuse, and Microsoft says refusing is intended everywhere.
FLEX_REJECTED_SITE_CONFIG = (
    "ftpsState",
    "use32BitWorkerProcess",
    "preWarmedInstanceCount",
    "netFrameworkVersion",
    "functionsRuntimeScaleMonitoringEnabled",
    "linuxFxVersion",
    "functionAppScaleLimit",
)
# App settings Flex refuses: the worker runtime is functionAppConfig.runtime there, and ':' in a name
# (only '__' nests a setting) fails the create.
FLEX_REJECTED_APP_SETTINGS = ("FUNCTIONS_WORKER_RUNTIME",)
# functionAppConfig.runtime values the Microsoft Flex Consumption template allows.
FLEX_RUNTIMES = {
    "python": ("3.10", "3.11", "3.12"),
    "node": ("20", "22"),
    "dotnet-isolated": ("8.0", "9.0", "10"),
    "java": ("11", "17", "21"),
    "powerShell": ("7.4",),
}
# Metrics a Flex Consumption app emits (monitoring data reference, "Flex Consumption plan" tables):
# billing (executions, execution units, always-ready units) and performance (instances, memory, CPU).
FLEX_METRICS = (
    "OnDemandFunctionExecutionCount",
    "AlwaysReadyFunctionExecutionCount",
    "OnDemandFunctionExecutionUnits",
    "AlwaysReadyFunctionExecutionUnits",
    "AlwaysReadyUnits",
    "InstanceCount",
    "MemoryWorkingSet",
    "AverageMemoryWorkingSet",
    "CpuPercentage",
)
FLEX_SUBNET_DELEGATION = "Microsoft.App/environments"
FLEX_DEPLOYMENT_IDENTITIES = ("SystemAssignedIdentity", "UserAssignedIdentity")
FLEX_DEPLOYMENT_AUTHENTICATIONS = (*FLEX_DEPLOYMENT_IDENTITIES, "StorageAccountConnectionString")
LIFECYCLE_MAX_RULES = 100
LIFECYCLE_RULE_NAME_MAX = 256
ROLE_CONDITION_VERSION = "2.0"
PRINCIPAL_TYPES = tuple(member.value for member in authorization.PrincipalType)


class Resource(Protocol):
    """What the rules read of a registered resource (tests/infra/pulumi_harness.Registered)."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def inputs(self) -> dict[str, Any]: ...


class StackResources:
    """The registered resources, for rules that read a resource the checked one names by id."""

    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources = list(resources)
        self._by_id = {resource.id.lower(): resource for resource in self.resources}

    def get(self, resource_id: object) -> Mapping[str, Any]:
        """The inputs of the resource with this id ({} if the stack has none: an external resource)."""
        found = self._by_id.get(str(resource_id).lower()) if resource_id else None
        return found.inputs if found else {}

    def type_of(self, resource_id: object) -> str | None:
        found = self._by_id.get(str(resource_id).lower()) if resource_id else None
        return found.type if found else None

    def of_type(self, type_token: str) -> list[Resource]:
        return [resource for resource in self.resources if resource.type == type_token]


Inputs = Mapping[str, Any]
Predicate = Callable[[Inputs, StackResources], bool]  # True: the resource breaks the rule


@dataclass(frozen=True)
class ArmRule:
    id: str
    resource_types: tuple[str, ...]
    violates: Predicate
    message: str
    sources: tuple[str, ...]  # the Microsoft doc, sample or verbatim ARM error it comes from


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str  # the logical (Pulumi) name
    message: str

    def __str__(self) -> str:
        return f"{self.rule} on {self.resource}: {self.message}"


# -- small readers ----------------------------------------------------------------------------------


def _dig(inputs: Inputs, *path: str) -> Any:
    value: Any = inputs
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _duration(value: object) -> timedelta | None:
    try:
        parsed = isodate.parse_duration(str(value))
    except (isodate.ISO8601Error, ValueError):
        return None
    return parsed if isinstance(parsed, timedelta) else None


def _outside(value: object, bounds: tuple[timedelta, timedelta]) -> bool:
    """A duration that is absent is Azure's default (inside); an unparsable one is outside."""
    if value is None:
        return False
    parsed = _duration(value)
    return parsed is None or not bounds[0] <= parsed <= bounds[1]


def _plan(app: Inputs, stack: StackResources) -> Inputs:
    return stack.get(app.get("serverFarmId"))


def _is_flex(app: Inputs, stack: StackResources) -> bool:
    return bool(_dig(_plan(app, stack), "sku", "tier") == "FlexConsumption")


def _namespace_sku(entity: Inputs, stack: StackResources) -> str | None:
    """The SKU of the namespace an entity (queue, topic) is declared in, by its namespaceName."""
    for namespace in stack.of_type(NAMESPACE):
        if namespace.id.rsplit("/", 1)[-1] == entity.get("namespaceName"):
            return _dig(namespace.inputs, "sku", "name")  # type: ignore[no-any-return]
    return None


# -- predicates ---------------------------------------------------------------------------------------


def _flex_site_config_rejected(app: Inputs, stack: StackResources) -> bool:
    config = app.get("siteConfig") or {}
    return _is_flex(app, stack) and any(key in config for key in FLEX_REJECTED_SITE_CONFIG)


def _flex_app_settings_rejected(app: Inputs, stack: StackResources) -> bool:
    names = [str(pair.get("name", "")) for pair in _dig(app, "siteConfig", "appSettings") or []]
    return _is_flex(app, stack) and any(name in FLEX_REJECTED_APP_SETTINGS or ":" in name for name in names)


def _flex_scale(app: Inputs) -> Inputs:
    return _dig(app, "functionAppConfig", "scaleAndConcurrency") or {}


def _flex_always_ready_below_zone_minimum(app: Inputs, stack: StackResources) -> bool:
    if not (_is_flex(app, stack) and _plan(app, stack).get("zoneRedundant")):
        return False
    counts = [entry.get("instanceCount", 0) for entry in _flex_scale(app).get("alwaysReady") or []]
    return not counts or min(counts) < ZONE_REDUNDANT_MIN_ALWAYS_READY


def _flex_instance_memory(app: Inputs, stack: StackResources) -> bool:
    return _is_flex(app, stack) and _flex_scale(app).get("instanceMemoryMB") not in INSTANCE_MEMORY_MB


def _flex_maximum_instances(app: Inputs, stack: StackResources) -> bool:
    if not _is_flex(app, stack):
        return False
    scale = _flex_scale(app)
    maximum = scale.get("maximumInstanceCount")
    always_ready = sum(entry.get("instanceCount", 0) for entry in scale.get("alwaysReady") or [])
    low, high = FLEX_MAXIMUM_INSTANCES
    return maximum is None or not low <= maximum <= high or always_ready > maximum


def _flex_runtime(app: Inputs, stack: StackResources) -> bool:
    runtime = _dig(app, "functionAppConfig", "runtime") or {}
    allowed = FLEX_RUNTIMES.get(str(runtime.get("name")), ())
    return _is_flex(app, stack) and runtime.get("version") not in allowed


def _flex_subnet_not_delegated(app: Inputs, stack: StackResources) -> bool:
    subnet_id = app.get("virtualNetworkSubnetId")
    if not (_is_flex(app, stack) and subnet_id):
        return False
    delegations = stack.get(subnet_id).get("delegations") or []
    return FLEX_SUBNET_DELEGATION not in {delegation.get("serviceName") for delegation in delegations}


def _flex_deployment_storage_auth(app: Inputs, stack: StackResources) -> bool:
    storage = _dig(app, "functionAppConfig", "deployment", "storage") or {}
    if not _is_flex(app, stack):
        return False
    auth = storage.get("authentication") or {}
    kind = auth.get("type")
    if kind not in FLEX_DEPLOYMENT_AUTHENTICATIONS:
        return True
    if kind == "UserAssignedIdentity":
        assigned = _dig(app, "identity", "userAssignedIdentities") or []
        return auth.get("userAssignedIdentityResourceId") not in assigned
    # A connection string is a shared key: an account with shared-key access off refuses it.
    host = str(storage.get("value", "")).removeprefix("https://").split(".", 1)[0]
    accounts = [a for a in stack.of_type(STORAGE_ACCOUNT) if a.id.rsplit("/", 1)[-1] == host]
    return kind not in FLEX_DEPLOYMENT_IDENTITIES and any(
        a.inputs.get("allowSharedKeyAccess") is False for a in accounts
    )


def _flex_alert_metric(alert: Inputs, stack: StackResources) -> bool:
    flex_scopes = [
        scope
        for scope in alert.get("scopes") or []
        if stack.type_of(scope) == WEB_APP and _is_flex(stack.get(scope), stack)
    ]
    criteria = _dig(alert, "criteria", "allOf") or []
    return bool(flex_scopes) and any(
        criterion.get("metricName") not in FLEX_METRICS
        for criterion in criteria
        if str(criterion.get("metricNamespace", "Microsoft.Web/sites")).lower() == "microsoft.web/sites"
    )


def _private_endpoint_to_standard_namespace(endpoint: Inputs, stack: StackResources) -> bool:
    targets = [
        connection.get("privateLinkServiceId")
        for connection in endpoint.get("privateLinkServiceConnections") or []
    ]
    return any(
        stack.type_of(target) == NAMESPACE and _dig(stack.get(target), "sku", "name") != "Premium"
        for target in targets
    )


def _zone_redundant_standard_namespace(namespace: Inputs, _: StackResources) -> bool:
    return bool(namespace.get("zoneRedundant")) and _dig(namespace, "sku", "name") != "Premium"


def _partitioned_entity_in_premium(entity: Inputs, stack: StackResources) -> bool:
    return bool(entity.get("enablePartitioning")) and _namespace_sku(entity, stack) == "Premium"


def _large_messages_outside_premium(entity: Inputs, stack: StackResources) -> bool:
    return entity.get("maxMessageSizeInKilobytes") is not None and _namespace_sku(entity, stack) != "Premium"


def _duplicate_window_out_of_bounds(entity: Inputs, _: StackResources) -> bool:
    return _outside(entity.get("duplicateDetectionHistoryTimeWindow"), DUPLICATE_WINDOW_RANGE)


def _lock_duration_out_of_bounds(entity: Inputs, _: StackResources) -> bool:
    return _outside(entity.get("lockDuration"), LOCK_DURATION_RANGE)


def _max_delivery_count_below_one(entity: Inputs, _: StackResources) -> bool:
    count = entity.get("maxDeliveryCount")
    return count is not None and count < 1


def _version_immutability_without_versioning(container: Inputs, stack: StackResources) -> bool:
    if not _dig(container, "immutableStorageWithVersioning", "enabled"):
        return False
    services = [
        service.inputs
        for service in stack.of_type(BLOB_SERVICE)
        if service.inputs.get("accountName") == container.get("accountName")
    ]
    return not any(service.get("isVersioningEnabled") for service in services)


def _lifecycle_rules_invalid(policy: Inputs, _: StackResources) -> bool:
    rules = _dig(policy, "policy", "rules") or []
    names = [rule.get("name", "") for rule in rules]
    return (
        not 1 <= len(rules) <= LIFECYCLE_MAX_RULES
        or len(set(names)) != len(names)
        or any(
            not (name.isalnum() and name.isascii() and len(name) <= LIFECYCLE_RULE_NAME_MAX) for name in names
        )
        or any(rule.get("type") != "Lifecycle" for rule in rules)
    )


def _condition_without_version(assignment: Inputs, _: StackResources) -> bool:
    has_condition = bool(assignment.get("condition"))
    version = assignment.get("conditionVersion")
    return (has_condition and version != ROLE_CONDITION_VERSION) or (
        not has_condition and version is not None
    )


def _unknown_principal_type(assignment: Inputs, _: StackResources) -> bool:
    principal_type = assignment.get("principalType")
    return principal_type is not None and principal_type not in PRINCIPAL_TYPES


_AVM_51021 = "https://github.com/Azure/terraform-azurerm-avm-res-web-site/issues/360"
_FLEX_TEMPLATE = (
    "https://github.com/Azure-Samples/azure-functions-flex-consumption-samples/blob/main/IaC/bicep/main.bicep"
)
_SB_ENTITIES = (QUEUE, TOPIC)

RULES: tuple[ArmRule, ...] = (
    ArmRule(
        "flex-site-config-rejected",
        (WEB_APP,),
        _flex_site_config_rejected,
        f"Flex Consumption refuses siteConfig properties {list(FLEX_REJECTED_SITE_CONFIG)} (ARM 51021); "
        "SiteConfigArgs adds netFrameworkVersion itself: pass the site config as a mapping",
        (
            _AVM_51021,
            "https://github.com/Azure/terraform-azurerm-avm-res-web-site/issues/283",
            "https://github.com/Azure/azure-functions-host/issues/10643",
            "https://github.com/pulumi/pulumi-azure-native/issues/4168",
        ),
    ),
    ArmRule(
        "flex-app-settings-rejected",
        (WEB_APP,),
        _flex_app_settings_rejected,
        f"Flex Consumption refuses the app settings {list(FLEX_REJECTED_APP_SETTINGS)} (the runtime is "
        "functionAppConfig.runtime) and setting names with ':' (nest with '__')",
        (
            "https://github.com/microsoft/vscode-azurefunctions/issues/4142",
            "https://github.com/Azure/azure-functions-host/issues/11908",
        ),
    ),
    ArmRule(
        "flex-always-ready-zone-redundant",
        (WEB_APP,),
        _flex_always_ready_below_zone_minimum,
        "on a zone-redundant Flex plan the platform keeps and bills at least "
        f"{ZONE_REDUNDANT_MIN_ALWAYS_READY} always-ready instances per function or group: declare each at "
        "least that",
        ("https://learn.microsoft.com/azure/reliability/reliability-functions",),
    ),
    ArmRule(
        "flex-instance-memory",
        (WEB_APP,),
        _flex_instance_memory,
        f"Flex Consumption instance memory (instanceMemoryMB) is one of {list(INSTANCE_MEMORY_MB)}",
        ("https://learn.microsoft.com/azure/azure-functions/flex-consumption-plan", _FLEX_TEMPLATE),
    ),
    ArmRule(
        "flex-maximum-instances",
        (WEB_APP,),
        _flex_maximum_instances,
        f"Flex Consumption maximumInstanceCount is {FLEX_MAXIMUM_INSTANCES[0]}-{FLEX_MAXIMUM_INSTANCES[1]} "
        "and always-ready instances count toward it",
        (_FLEX_TEMPLATE,),
    ),
    ArmRule(
        "flex-runtime",
        (WEB_APP,),
        _flex_runtime,
        f"Flex Consumption functionAppConfig.runtime is one of {FLEX_RUNTIMES}",
        (_FLEX_TEMPLATE,),
    ),
    ArmRule(
        "flex-subnet-delegation",
        (WEB_APP,),
        _flex_subnet_not_delegated,
        f"Flex Consumption VNet integration needs a subnet delegated to {FLEX_SUBNET_DELEGATION}",
        (
            "https://github.com/Azure-Samples/functions-quickstart-python-http-azd/blob/main/infra/app/vnet.bicep",
        ),
    ),
    ArmRule(
        "flex-deployment-storage-auth",
        (WEB_APP,),
        _flex_deployment_storage_auth,
        f"Flex deployment storage authenticates as one of {list(FLEX_DEPLOYMENT_AUTHENTICATIONS)}; a "
        "user-assigned identity must be one of the app's, and an account with shared-key access off "
        "takes an identity only",
        (
            "https://github.com/Azure-Samples/functions-quickstart-python-http-azd/blob/main/infra/app/api.bicep",
            _FLEX_TEMPLATE,
        ),
    ),
    ArmRule(
        "flex-alert-metrics",
        (METRIC_ALERT,),
        _flex_alert_metric,
        f"a metric alert on a Flex Consumption app must use a metric Flex emits: {list(FLEX_METRICS)}",
        ("https://learn.microsoft.com/azure/azure-functions/monitor-functions-reference",),
    ),
    ArmRule(
        "servicebus-private-endpoint-premium",
        (PRIVATE_ENDPOINT,),
        _private_endpoint_to_standard_namespace,
        "Service Bus private endpoints and VNets are Premium-only",
        (
            "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-service-endpoints",
            "https://github.com/Azure/azure-service-bus/issues/474",
        ),
    ),
    ArmRule(
        "servicebus-zone-redundant-premium",
        (NAMESPACE,),
        _zone_redundant_standard_namespace,
        "a zone-redundant Service Bus namespace is a Premium namespace",
        (
            "https://learn.microsoft.com/dotnet/api/microsoft.azure.powershell.cmdlets.servicebus.models"
            ".isbnamespace.zoneredundant",
        ),
    ),
    ArmRule(
        "servicebus-premium-entity-partitioning",
        _SB_ENTITIES,
        _partitioned_entity_in_premium,
        "a Premium namespace partitions at the namespace (premiumMessagingPartitions), not per entity "
        "(enablePartitioning)",
        (
            "https://learn.microsoft.com/azure/service-bus-messaging/enable-partitions-premium",
            "https://github.com/hashicorp/terraform-provider-azurerm/issues/1391",
        ),
    ),
    ArmRule(
        "servicebus-large-messages-premium",
        _SB_ENTITIES,
        _large_messages_outside_premium,
        "maxMessageSizeInKilobytes (large messages) is a Premium-only property",
        (
            "https://learn.microsoft.com/dotnet/api/azure.resourcemanager.servicebus.servicebustopicdata"
            ".maxmessagesizeinkilobytes",
        ),
    ),
    ArmRule(
        "servicebus-duplicate-detection-window",
        _SB_ENTITIES,
        _duplicate_window_out_of_bounds,
        "duplicateDetectionHistoryTimeWindow is between 20 seconds and 7 days",
        (
            "https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties"
            ".duplicatedetectionhistorytimewindow",
        ),
    ),
    ArmRule(
        "servicebus-lock-duration",
        (QUEUE, SUBSCRIPTION),
        _lock_duration_out_of_bounds,
        "lockDuration is at most 5 minutes (PT5M)",
        (
            "https://learn.microsoft.com/dotnet/api/azure.resourcemanager.servicebus.servicebusqueuedata.lockduration",
        ),
    ),
    ArmRule(
        "servicebus-max-delivery-count",
        (QUEUE, SUBSCRIPTION),
        _max_delivery_count_below_one,
        "maxDeliveryCount is at least 1",
        (
            "https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties.maxdeliverycount",
        ),
    ),
    ArmRule(
        "storage-version-immutability-needs-versioning",
        (BLOB_CONTAINER,),
        _version_immutability_without_versioning,
        "version-level immutability (immutableStorageWithVersioning) needs blob versioning on the account",
        (
            "https://learn.microsoft.com/dotnet/api/azure.resourcemanager.storage.blobcontainerresource"
            ".enableversionlevelimmutabilityasync",
            "https://github.com/MicrosoftDocs/azure-docs/blob/main/articles/storage/blobs/"
            "immutable-policy-configure-version-scope.md",
        ),
    ),
    ArmRule(
        "storage-lifecycle-rules",
        (MANAGEMENT_POLICY,),
        _lifecycle_rules_invalid,
        f"a lifecycle policy has 1-{LIFECYCLE_MAX_RULES} rules of type Lifecycle, named uniquely with up to "
        f"{LIFECYCLE_RULE_NAME_MAX} alphanumeric characters",
        ("https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-structure",),
    ),
    ArmRule(
        "rbac-condition-version",
        (ROLE_ASSIGNMENT,),
        _condition_without_version,
        f"a role assignment condition needs conditionVersion '{ROLE_CONDITION_VERSION}' (the only accepted "
        "value), and conditionVersion needs a condition",
        ("https://learn.microsoft.com/javascript/api/@azure/arm-authorization/roleassignment",),
    ),
    ArmRule(
        "rbac-principal-type",
        (ROLE_ASSIGNMENT,),
        _unknown_principal_type,
        f"principalType is one of {list(PRINCIPAL_TYPES)}",
        ("https://learn.microsoft.com/javascript/api/@azure/arm-authorization/roleassignment",),
    ),
)


def violations(resources: Sequence[Resource], rules: Sequence[ArmRule] = RULES) -> list[Violation]:
    """Every (rule, resource) pair where a registered resource breaks a rule of its type."""
    stack = StackResources(resources)
    return [
        Violation(rule.id, resource.name, rule.message)
        for rule in rules
        for resource in stack.resources
        if resource.type in rule.resource_types and rule.violates(resource.inputs, stack)
    ]
