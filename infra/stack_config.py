"""Per-environment stack settings, read from Pulumi stack config as a plain dict (testable offline).

Every key has a default or a clear `StackConfigError` naming the key (`claimcheck:<key>`) and the
expected form. Keys are camelCase, as Pulumi stack files write them. The topology lives under
`claimcheck:topology` and is parsed by infra.topology.
"""

from __future__ import annotations

import ipaddress
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml
from claimcheck.access import AccessGrant, AccessTable
from claimcheck.callers import AppRole
from claimcheck.policy import DEFAULT_PURPOSES, Classification, CleanupPolicy
from claimcheck.settings import FUNCTIONS_REQUEST_LIMIT_BYTES, INLINE_REQUEST_MAX_BYTES, SettingsError

from infra.encryption import IDENTITY_KEY, URI_KEY, CustomerManagedKey, customer_managed_key
from infra.topology import EVIDENCE_PURPOSE, Topology, load_topology

PROJECT = "claimcheck"
REPO_ROOT = Path(__file__).resolve().parent.parent

SERVICE_BUS_SKUS = ("Standard", "Premium")  # Basic has neither topics nor sessions
PREMIUM_CAPACITIES = (1, 2, 4, 8, 16)
PUBLIC_NETWORK_ACCESS = ("Enabled", "Disabled", "SecuredByPerimeter")
STORAGE_SKUS = (
    "Standard_LRS",
    "Standard_ZRS",
    "Standard_GRS",
    "Standard_RAGRS",
    "Standard_GZRS",
    "Standard_RAGZRS",
)
INSTANCE_MEMORY_MB = (512, 2048, 4096)  # Flex Consumption instance sizes
FLEX_MAXIMUM_INSTANCES = (40, 1000)  # Flex Consumption maximumInstanceCount range
# With zone redundancy the Flex platform keeps at least this many always-ready instances for each
# per-function scaling function or group, whatever is configured, and bills them (infra/arm_rules.py).
ZONE_REDUNDANT_MIN_ALWAYS_READY = 2
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# Domains reserved for documentation and testing (RFC 2606, RFC 6761): no mail is ever delivered there,
# so an alert receiver on one is a placeholder that silences the alert.
_RESERVED_EMAIL_DOMAIN = re.compile(
    r"(?:^|\.)(?:example\.(?:com|net|org)|(?:test|example|invalid|localhost))$", re.IGNORECASE
)
_LOCATION = re.compile(r"^[a-z][a-z0-9]{2,30}$")
_ENVIRONMENT = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
# Azure tag values: up to 256 characters; '<', '>', '%', '&', '\\', '?' and '/' are refused in tag names
# and kept out of values too so cost reports and policies can match them.
_TAG_VALUE = re.compile(r"^[^<>%&\\?/\s][^<>%&\\?/]{0,255}$")
_TAG_FORM = "1-256 characters without < > % & \\ ? / (a tag value), not starting with a space"
_LOGICAL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
# GUIDs that are never a real Entra object id: the nil and max GUIDs, one hex digit repeated, and the
# "00000000-0000-0000-0000-00000000000N" kind that sample files ship as placeholders.
_PLACEHOLDER_GUID = re.compile(
    r"^(?:([0-9a-f])\1{7}-\1{4}-\1{4}-\1{4}-\1{12}"
    r"|00000000-0000-0000-0000-[0-9a-f]{12})$"
)


# Principal types a grant may name (ARM's principalType and Entra's app-role assignees); ARM refuses
# a role assignment whose principalType does not match the object.
PRINCIPAL_TYPES = ("User", "Group", "ServicePrincipal")

_Choice = TypeVar("_Choice", str, int)


class StackConfigError(ValueError):
    """A stack config value is missing or malformed; the message names the key and the expected form."""


@dataclass(frozen=True)
class ProducerPrincipal:
    """A principal allowed to send documents: Sender on the queue, blob writer on the container
    (the Python API), and app roles on the API with an access-table grant (the HTTP API). Also the
    shape of smoke and operator entries. A user, a group (an on-call rotation) or a service principal."""

    name: str
    object_id: str
    # The API's app roles assigned to it (Entra puts them in its tokens).
    app_roles: tuple[AppRole, ...] = (AppRole.SUBMIT, AppRole.READ)
    # Its access-table grant: tenant ids (or prefix*), and optionally purposes and classifications
    # (None = all). No tenants: no grant, so every HTTP call for a tenant is refused.
    tenants: tuple[str, ...] = ()
    purposes: tuple[str, ...] | None = None
    classifications: tuple[str, ...] | None = None
    principal_type: str = "ServicePrincipal"

    def grant(self) -> AccessGrant | None:
        if not self.tenants:
            return None
        return AccessGrant(
            name=self.name,
            principal=self.object_id,
            tenants=self.tenants,
            purposes=None if self.purposes is None else frozenset(self.purposes),
            classifications=None
            if self.classifications is None
            else frozenset(Classification(value) for value in self.classifications),
        )


@dataclass(frozen=True)
class StackSettings:
    # Resource names (logical and the default resource group) derive from `stack_slug`, the Pulumi
    # stack's own name, never from `environment`: editing config must not rename, and so replace,
    # the stateful resources (docs/deploy.md, "Stateful resources").
    stack_slug: str
    environment: str
    location: str
    resource_group_name: str
    service_bus_sku: str
    service_bus_capacity: int
    public_network_access: str
    # VNet, private endpoints and privatelink DNS for the namespace and both accounts, public network
    # access off, Flex Consumption VNet integration (infra/components/network.py).
    private_networking: bool
    vnet_address_space: str
    storage_sku: str
    blob_delete_retention_days: int
    container_delete_retention_days: int
    log_retention_days: int
    alert_emails: tuple[str, ...]
    backlog_alert_threshold: int
    producer_principals: tuple[ProducerPrincipal, ...]
    # Identities that run `claimcheck-ops smoke` (the CI smoke identity): the API's app roles for the
    # smoke tenant and nothing in Azure (the smoke test goes through the HTTP API only).
    smoke_test_principals: tuple[ProducerPrincipal, ...]
    # Who runs `claimcheck-ops` against this stack (dlq list/show/replay, peek, stats): Azure Service
    # Bus Data Owner on each queue and subscription, Sender on each topic; no payload or table access.
    operator_principals: tuple[ProducerPrincipal, ...]
    # Tags on every resource that takes them (infra/tags.py).
    owner: str
    cost_center: str
    function_maximum_instances: int
    function_instance_memory_mb: int
    protect_stateful_resources: bool
    # Zone redundancy of the Premium namespace, the storage accounts' SKU (ZRS family) and the Flex plan.
    zone_redundant: bool
    # Infrastructure (double) encryption of both storage accounts; fixed when an account is created.
    require_infrastructure_encryption: bool
    # Always-ready instances of the documents consumer (Flex Consumption): no cold start under load.
    consumer_always_ready: int
    # Version-level WORM on the evidence purpose's own container: every blob version immutable for that
    # purpose's retention (evidence_immutability_days). Refused unless the purpose has its own container
    # and every purpose routed there retains its payloads.
    evidence_immutability: bool
    topology: Topology
    # False when the resource group exists already (scripts/bootstrap_ci.py creates it, so the CI
    # identities can be scoped to it): the stack then reads it and never creates or deletes it.
    create_resource_group: bool = True
    # False when scripts/bootstrap_ci.py defined the stack's custom roles (infra/roles.py) in that
    # group, so the CI deploy identity needs no right to write role definitions.
    create_custom_roles: bool = True
    # Owners of the API's app registration and service principal besides whoever creates them (the
    # CI deploy identity): its Graph Application.ReadWrite.OwnedBy reaches only what it owns.
    api_owner_object_ids: tuple[str, ...] = ()
    # Access-table grants by Entra group (the token's `groups` claim): any caller in the group gets the
    # grant's tenants, purposes and classifications. Any such grant turns on the API's group claims.
    group_grants: tuple[AccessGrant, ...] = ()
    # The purposes whose payloads this stack's consumer reads (its managed identity is their one allowed
    # consumer); the others' messages are dead-lettered access_denied. Default: every purpose.
    consumed_purposes: tuple[str, ...] = tuple(sorted(DEFAULT_PURPOSES))
    # Your Key Vault key for the payload account (and a Premium namespace); None: Microsoft-managed keys.
    customer_managed_key: CustomerManagedKey | None = None
    # POST /api/documents' inline cap (CLAIMCHECK_MAX_INLINE_REQUEST_BYTES); the Functions host's request
    # limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT) is derived from it (claimcheck.settings).
    max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES

    @property
    def evidence_container(self) -> str:
        return self.topology.bindings.container_for(EVIDENCE_PURPOSE)

    @property
    def evidence_immutability_days(self) -> int:
        """Days every new version in the evidence container stays locked (0 = no WORM): the shortest
        retention of the purposes routed there, in whole days (floored, so the reconciler's delete at the
        end of retention never meets a lock)."""
        if not self.evidence_immutability:
            return 0
        routed = [
            policy
            for name, policy in DEFAULT_PURPOSES.items()
            if self.topology.bindings.container_for(name) == self.evidence_container
        ]
        return min(policy.retention // timedelta(days=1) for policy in routed)

    def immutable_containers(self) -> dict[str, int]:
        """container -> WORM days, as the app reads it (CLAIMCHECK_IMMUTABLE_CONTAINERS)."""
        days = self.evidence_immutability_days
        return {self.evidence_container: days} if days else {}


def stack_slug(stack: str) -> str:
    """The stack name as it can appear in resource names: lower case, [a-z0-9-], at most 16 characters."""
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-")[:16].rstrip("-")
    if not slug or not slug[0].isalpha():
        raise StackConfigError(
            f"stack name {stack!r} cannot name resources: start it with a letter "
            "(resource names derive from the stack name)"
        )
    return slug


def load_settings(config: Mapping[str, Any], stack: str) -> StackSettings:
    """Settings from the project's config values (keys without the `claimcheck:` prefix)."""
    reader = _Reader(config)
    environment = reader.string(
        "environment",
        stack.lower(),
        _ENVIRONMENT,
        "1-16 lower-case letters, digits or '-', starting with a letter",
    )
    sku = reader.choice("serviceBusSku", "Standard", SERVICE_BUS_SKUS)
    private = reader.boolean("privateNetworking", False)
    public_access = reader.choice(
        "publicNetworkAccess", "Disabled" if private else "Enabled", PUBLIC_NETWORK_ACCESS
    )
    if private and sku != "Premium":
        raise StackConfigError(
            f"{PROJECT}:privateNetworking: true needs {PROJECT}:serviceBusSku 'Premium' "
            f"(private endpoints are a Premium feature), got {sku!r}"
        )
    if private and public_access == "Enabled":
        raise StackConfigError(
            f"{PROJECT}:publicNetworkAccess: 'Enabled' contradicts "
            f"{PROJECT}:privateNetworking: true; omit it or set 'Disabled'"
        )
    if not private and public_access == "Disabled":
        raise StackConfigError(
            f"{PROJECT}:publicNetworkAccess: 'Disabled' without {PROJECT}:"
            "privateNetworking leaves the app no path to the namespace and storage; "
            "set privateNetworking"
        )
    if sku != "Premium" and public_access != "Enabled":
        raise StackConfigError(
            f"{PROJECT}:publicNetworkAccess: {public_access!r} needs claimcheck:serviceBusSku 'Premium' "
            "(network isolation and private endpoints are Premium features)"
        )
    capacity = reader.choice("serviceBusCapacity", 1, PREMIUM_CAPACITIES)
    slug = stack_slug(stack)
    settings = StackSettings(
        stack_slug=slug,
        environment=environment,
        location=reader.string(
            "location",
            "westeurope",
            _LOCATION,
            "an Azure region name such as 'westeurope' or 'swedencentral'",
        ),
        resource_group_name=reader.string(
            "resourceGroupName",
            f"rg-claimcheck-{slug}",
            re.compile(r"^[-\w.()]{1,89}[-\w()]$"),
            "1-90 letters, digits, '-', '_', '.', '(' or ')', not ending in '.'",
        ),
        service_bus_sku=sku,
        service_bus_capacity=capacity,
        public_network_access=public_access,
        private_networking=private,
        vnet_address_space=reader.cidr("vnetAddressSpace", "10.60.0.0/22"),
        storage_sku=reader.choice("storageSku", "Standard_LRS", STORAGE_SKUS),
        blob_delete_retention_days=reader.integer("blobDeleteRetentionDays", 7, 1, 365),
        container_delete_retention_days=reader.integer("containerDeleteRetentionDays", 7, 1, 365),
        log_retention_days=reader.integer("logRetentionDays", 30, 30, 730),
        alert_emails=reader.emails("alertEmails"),
        backlog_alert_threshold=reader.integer("backlogAlertThreshold", 1000, 1, 10_000_000),
        producer_principals=reader.principals("producerPrincipals"),
        smoke_test_principals=reader.principals("smokeTestPrincipals"),
        operator_principals=reader.principals("operatorPrincipals", api_access=False),
        owner=reader.string("owner", "unassigned", _TAG_VALUE, _TAG_FORM),
        cost_center=reader.string("costCenter", "unassigned", _TAG_VALUE, _TAG_FORM),
        function_maximum_instances=reader.integer(
            "functionMaximumInstances", FLEX_MAXIMUM_INSTANCES[0], *FLEX_MAXIMUM_INSTANCES
        ),
        function_instance_memory_mb=reader.choice("functionInstanceMemoryMb", 2048, INSTANCE_MEMORY_MB),
        protect_stateful_resources=reader.boolean("protectStatefulResources", environment != "dev"),
        zone_redundant=reader.boolean("zoneRedundant", False),
        require_infrastructure_encryption=reader.boolean("requireInfrastructureEncryption", True),
        consumer_always_ready=reader.integer("consumerAlwaysReady", 0, 0, 100),
        evidence_immutability=reader.boolean("evidenceImmutability", False),
        topology=load_topology(reader.mapping("topology")),
        create_resource_group=reader.boolean("createResourceGroup", True),
        create_custom_roles=reader.boolean("createCustomRoles", True),
        api_owner_object_ids=reader.object_ids("apiOwnerObjectIds"),
        group_grants=reader.group_grants("groupGrants"),
        consumed_purposes=reader.purposes("consumedPurposes"),
        customer_managed_key=reader.customer_managed_key(),
        max_inline_request_bytes=reader.integer(
            "maxInlineRequestBytes", INLINE_REQUEST_MAX_BYTES, 1, FUNCTIONS_REQUEST_LIMIT_BYTES
        ),
    )
    reader.reject_unknown()
    _refuse_contradictions(settings)
    return settings


ZONE_REDUNDANT_STORAGE = ("Standard_ZRS", "Standard_GZRS", "Standard_RAGZRS")


def _refuse_contradictions(settings: StackSettings) -> None:
    """Settings that each parse but cannot hold together, refused before any resource is declared."""
    if settings.zone_redundant and settings.service_bus_sku != "Premium":
        raise StackConfigError(
            f"{PROJECT}:zoneRedundant: true needs {PROJECT}:serviceBusSku 'Premium' "
            "(only Premium namespaces are zone redundant)"
        )
    if settings.zone_redundant and settings.storage_sku not in ZONE_REDUNDANT_STORAGE:
        raise StackConfigError(
            f"{PROJECT}:zoneRedundant: true needs {PROJECT}:storageSku among "
            f"{list(ZONE_REDUNDANT_STORAGE)}, got {settings.storage_sku!r}"
        )
    if settings.evidence_immutability:
        _refuse_worm_contradictions(settings)
    if settings.zone_redundant and settings.consumer_always_ready < ZONE_REDUNDANT_MIN_ALWAYS_READY:
        raise StackConfigError(
            f"{PROJECT}:consumerAlwaysReady: {settings.consumer_always_ready} with "
            f"{PROJECT}:zoneRedundant: true; set at least {ZONE_REDUNDANT_MIN_ALWAYS_READY} (a "
            "zone-redundant Flex Consumption plan keeps and bills at least "
            f"{ZONE_REDUNDANT_MIN_ALWAYS_READY} always-ready instances per function, whatever is "
            "configured)"
        )
    if settings.consumer_always_ready > settings.function_maximum_instances:
        raise StackConfigError(
            f"{PROJECT}:consumerAlwaysReady: {settings.consumer_always_ready} exceeds "
            f"{PROJECT}:functionMaximumInstances {settings.function_maximum_instances} "
            "(always-ready instances count toward the maximum)"
        )


def _refuse_worm_contradictions(settings: StackSettings) -> None:
    """WORM on the evidence container only where nothing the app must delete can land."""
    bindings, key = settings.topology.bindings, f"{PROJECT}:evidenceImmutability"
    container = settings.evidence_container
    if container == bindings.payload_container:
        raise StackConfigError(
            f"{key}: purpose {EVIDENCE_PURPOSE!r} shares the payload container {container!r}; "
            "give it its own in topology.bindings.purposeContainers (the shared container holds "
            "purposes that delete after use)"
        )
    deleting = sorted(
        name
        for name, policy in DEFAULT_PURPOSES.items()
        if bindings.container_for(name) == container and policy.cleanup != CleanupPolicy.RETAIN
    )
    if deleting:
        raise StackConfigError(
            f"{key}: purposes {deleting} routed to container {container!r} delete after use; "
            "a WORM policy there would make their deletes fail"
        )
    days = settings.evidence_immutability_days
    if days < 1:
        raise StackConfigError(f"{key}: the retention of purpose {EVIDENCE_PURPOSE!r} is under a day")
    if days > settings.topology.lifecycle.delete_after_days:
        raise StackConfigError(
            f"{key}: the {days}-day lock outlasts topology.lifecycle.deleteAfterDays "
            f"{settings.topology.lifecycle.delete_after_days}: the expiry rule could not delete a "
            "locked version"
        )


class _Reader:
    """Reads typed values by key, remembering which keys were read to reject unknown ones."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self._read: set[str] = set()

    def _get(self, key: str) -> Any:
        self._read.add(key)
        return self._config.get(key)

    def string(self, key: str, default: str, pattern: re.Pattern[str], form: str) -> str:
        """A string value; a derived default (e.g. from the stack name) is checked like a given one."""
        value = self._get(key)
        given = value is not None
        value = value if given else default
        if not isinstance(value, str) or not pattern.fullmatch(value):
            origin = "" if given else " (derived default; set the key explicitly)"
            raise StackConfigError(f"{PROJECT}:{key}: {value!r}{origin} is invalid; expected {form}")
        return value

    def choice(self, key: str, default: _Choice, allowed: tuple[_Choice, ...]) -> _Choice:
        value = self._get(key)
        if value is None:
            return default
        if value not in allowed or isinstance(value, bool):
            raise StackConfigError(f"{PROJECT}:{key}: {value!r} is invalid; expected one of {list(allowed)}")
        return value  # type: ignore[no-any-return]  # membership in `allowed` fixes the type

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise StackConfigError(f"{PROJECT}:{key}: {value!r} is invalid; expected true or false")
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise StackConfigError(
                f"{PROJECT}:{key}: {value!r} is invalid; expected a whole number from {low} to {high}"
            )
        return value

    def cidr(self, key: str, default: str) -> str:
        """An IPv4 private address space large enough for two /24 subnets."""
        value = self._get(key)
        value = default if value is None else value
        try:
            network = ipaddress.IPv4Network(value) if isinstance(value, str) else None
        except ValueError:
            network = None
        if network is None or not network.is_private or network.prefixlen > 23:
            raise StackConfigError(
                f"{PROJECT}:{key}: {value!r} is invalid; expected a private IPv4 CIDR "
                "of /23 or larger such as '10.60.0.0/22' (two /24 subnets)"
            )
        return str(network)

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise StackConfigError(
                f"{PROJECT}:{key}: expected an object (a YAML mapping), got {type(value).__name__}"
            )
        return value

    def emails(self, key: str) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(item, str) and _EMAIL.fullmatch(item) for item in value
        ):
            raise StackConfigError(
                f"{PROJECT}:{key}: expected a list of e-mail addresses such as "
                f"['oncall@your-company.com'], got {value!r}"
            )
        placeholders = [item for item in value if _RESERVED_EMAIL_DOMAIN.search(item.rpartition("@")[2])]
        if placeholders:
            raise StackConfigError(
                f"{PROJECT}:{key}: {placeholders} use a reserved domain (example.com, .test, ...) "
                "that receives no mail: a placeholder; list your real on-call addresses"
            )
        return tuple(value)

    def principals(self, key: str, *, api_access: bool = True) -> tuple[ProducerPrincipal, ...]:
        """Principals by name and object id; with `api_access`, also their API roles and grant."""
        value = self._get(key)
        if value is None:
            return ()
        form = (
            "a list of {name: <lower-case-name>, objectId: <GUID of a user, group or service "
            f"principal>, optional principalType: one of {list(PRINCIPAL_TYPES)}"
        ) + (
            ", optional appRoles, tenants, purposes, classifications: lists of strings}"
            if api_access
            else "}"
        )
        allowed = _PRINCIPAL_KEYS if api_access else {"name", "objectId", "principalType"}
        if not isinstance(value, list):
            raise StackConfigError(f"{PROJECT}:{key}: expected {form}, got {value!r}")
        principals = []
        for index, entry in enumerate(value):
            where = f"{PROJECT}:{key}[{index}]"
            if not isinstance(entry, Mapping) or not {"name", "objectId"} <= set(entry) <= allowed:
                raise StackConfigError(f"{where}: expected {form}, got {entry!r}")
            name, object_id = entry["name"], entry["objectId"]
            if not isinstance(name, str) or not _LOGICAL_NAME.fullmatch(name):
                raise StackConfigError(
                    f"{where}.name: {name!r} must be 1-31 lower-case letters, digits "
                    "or '-', starting with a letter"
                )
            kind = entry.get("principalType", "ServicePrincipal")
            if kind not in PRINCIPAL_TYPES:
                raise StackConfigError(
                    f"{where}.principalType: {kind!r} is invalid; expected one of {list(PRINCIPAL_TYPES)} "
                    "(the type of the object, which ARM checks against the role assignment)"
                )
            principal = ProducerPrincipal(
                name=name, object_id=_guid(object_id, f"{where}.objectId"), principal_type=kind
            )
            principals.append(
                _with_api_access(principal, entry, where) if api_access else replace(principal, app_roles=())
            )
        if len({principal.name for principal in principals}) != len(principals):
            raise StackConfigError(f"{PROJECT}:{key}: principal names must be unique")
        return tuple(principals)

    def object_ids(self, key: str) -> tuple[str, ...]:
        """A list of distinct Entra object ids (GUIDs that are not placeholders)."""
        value = self._get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise StackConfigError(f"{PROJECT}:{key}: expected a list of object ids (GUIDs), got {value!r}")
        ids = tuple(_guid(item, f"{PROJECT}:{key}[{index}]") for index, item in enumerate(value))
        if len(set(ids)) != len(ids):
            raise StackConfigError(f"{PROJECT}:{key}: object ids must be unique")
        return ids

    def purposes(self, key: str) -> tuple[str, ...]:
        """Purpose names of the purpose table (claimcheck.policy), at least one; absent: all of them."""
        value = self._get(key)
        known = sorted(DEFAULT_PURPOSES)
        if value is None:
            return tuple(known)
        if (
            not isinstance(value, list)
            or not value
            or len(set(value)) != len(value)
            or not all(isinstance(item, str) and item in DEFAULT_PURPOSES for item in value)
        ):
            raise StackConfigError(
                f"{PROJECT}:{key}: {value!r} is invalid; expected a non-empty list of "
                f"distinct purposes among {known}"
            )
        return tuple(value)

    def group_grants(self, key: str) -> tuple[AccessGrant, ...]:
        """Grants by group object id, checked by the parser the Function App uses on the app setting."""
        value = self._get(key)
        if value is None:
            return ()
        form = (
            "a list of {name: <lower-case-name>, groupId: <GUID of an Entra group>, tenants: [...], "
            "optional purposes, classifications: lists of strings}"
        )
        if not isinstance(value, list):
            raise StackConfigError(f"{PROJECT}:{key}: expected {form}, got {value!r}")
        grants: list[AccessGrant] = []
        for index, entry in enumerate(value):
            where = f"{PROJECT}:{key}[{index}]"
            allowed = {"name", "groupId", "tenants", "purposes", "classifications"}
            if not isinstance(entry, Mapping) or not {"name", "groupId", "tenants"} <= set(entry) <= allowed:
                raise StackConfigError(f"{where}: expected {form}, got {entry!r}")
            if not isinstance(entry["name"], str) or not _LOGICAL_NAME.fullmatch(entry["name"]):
                raise StackConfigError(
                    f"{where}.name: {entry['name']!r} must be 1-31 lower-case letters, "
                    "digits or '-', starting with a letter"
                )
            group = _guid(entry["groupId"], f"{where}.groupId")
            grant = {"group": group, **{k: v for k, v in entry.items() if k != "groupId"}}
            try:
                grants.extend(AccessTable.parse(json.dumps([grant])).grants)
            except SettingsError as error:
                detail = str(error).replace("CLAIMCHECK_ACCESS_TABLE[0]", "grant")
                raise StackConfigError(f"{where}: {detail}") from None
        if len({grant.name for grant in grants}) != len(grants):
            raise StackConfigError(f"{PROJECT}:{key}: grant names must be unique")
        return tuple(grants)

    def customer_managed_key(self) -> CustomerManagedKey | None:
        try:
            return customer_managed_key(self._get(URI_KEY), self._get(IDENTITY_KEY), PROJECT)
        except ValueError as error:
            raise StackConfigError(str(error)) from None

    def reject_unknown(self) -> None:
        unknown = sorted(set(self._config) - self._read)
        if unknown:
            raise StackConfigError(
                f"unknown config key(s) {[f'{PROJECT}:{key}' for key in unknown]}; "
                f"known keys: {sorted(self._read)}"
            )


_PRINCIPAL_KEYS = {"name", "objectId", "principalType", "appRoles", "tenants", "purposes", "classifications"}


def _with_api_access(principal: ProducerPrincipal, entry: Mapping[str, Any], where: str) -> ProducerPrincipal:
    """The API access of a producer principal: app roles (checked names) and its access-table grant
    (checked by the same parser the Function App uses on the app setting)."""
    lists: dict[str, tuple[str, ...] | None] = {}
    for key in ("appRoles", "tenants", "purposes", "classifications"):
        raw = entry.get(key)
        if raw is not None and (not isinstance(raw, list) or not all(isinstance(item, str) for item in raw)):
            raise StackConfigError(f"{where}.{key}: expected a list of strings, got {raw!r}")
        lists[key] = None if raw is None else tuple(raw)
    roles = lists["appRoles"]
    try:
        app_roles = principal.app_roles if roles is None else tuple(AppRole(role) for role in roles)
    except ValueError:
        raise StackConfigError(
            f"{where}.appRoles: expected roles among {[r.value for r in AppRole]}, got {list(roles or ())}"
        ) from None
    with_access = ProducerPrincipal(
        principal.name,
        principal.object_id,
        app_roles,
        lists["tenants"] or (),
        lists["purposes"],
        lists["classifications"],
        principal.principal_type,
    )
    grant: dict[str, Any] = {
        "name": principal.name,
        "principal": principal.object_id,
        "tenants": list(lists["tenants"] or ()),
    }
    grant |= {
        key: list(values) for key in ("purposes", "classifications") if (values := lists[key]) is not None
    }
    if grant["tenants"]:
        try:
            AccessTable.parse(json.dumps([grant]))
        except SettingsError as error:
            detail = str(error).replace("CLAIMCHECK_ACCESS_TABLE[0]", "grant")
            raise StackConfigError(f"{where}: {detail}") from None
    elif lists["purposes"] is not None or lists["classifications"] is not None:
        raise StackConfigError(f"{where}: purposes and classifications need tenants")
    return with_access


def _guid(value: object, where: str) -> str:
    """A principal's object id: a GUID that is not a placeholder (a role assignment to a placeholder
    fails halfway through a deployment, after other resources were created)."""
    form = "the object id (a GUID) of a user, group or service principal in your tenant"
    try:
        guid = str(uuid.UUID(str(value)))
    except ValueError:
        raise StackConfigError(f"{where}: {value!r} is not a GUID; expected {form}") from None
    if _PLACEHOLDER_GUID.fullmatch(guid):
        raise StackConfigError(
            f"{where}: {guid!r} is a placeholder, not a real object id; expected {form} "
            "(az ad sp show --id <app id> --query id)"
        )
    return guid


def read_stack_config(stack: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """The project's config values from `Pulumi.<stack>.yaml`, keys without the `claimcheck:` prefix."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackConfigError(
            f"no stack file {path.name} in {root}; stacks: "
            f"{sorted(p.name for p in root.glob('Pulumi.*.yaml'))}"
        )
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    config = document.get("config") or {}
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix)}
