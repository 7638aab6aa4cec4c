"""Runs the Pulumi program offline under `pulumi.runtime.set_mocks`, collecting every resource.

The mocks answer like Azure Resource Manager would: realistic resource ids (so role-assignment
scopes can be asserted), the namespace endpoint, storage endpoints, the Function App's identity.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from infra import arm_rules

SUBSCRIPTION_ID = "00000000-1111-2222-3333-444444444444"
TENANT_ID = "99999999-8888-7777-6666-555555555555"
APP_PRINCIPAL_ID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"  # the app's user-assigned identity
APP_IDENTITY_CLIENT_ID = "c1e70000-0000-4000-8000-0000000000b2"
API_CLIENT_ID = "c1e70000-0000-4000-8000-0000000000a1"  # the API's app registration (Entra ID)
API_SERVICE_PRINCIPAL_ID = "5e7f0000-0000-4000-8000-0000000000a2"
# Who runs the program (azuread's getClientConfig): a person on a laptop unless a test says otherwise.
LAPTOP_USER_OBJECT_ID = "1a2b3c4d-0000-4000-8000-00000000c0de"


@dataclass(frozen=True)
class Registered:
    type: str
    name: str  # logical (Pulumi) name
    id: str
    inputs: dict[str, Any]


@dataclass(frozen=True)
class Registration:
    """What the engine learns about a resource beyond its inputs: its URN (identity across runs: a
    changed URN is a delete plus a create) and the options that guard it."""

    urn: str
    protect: bool
    retain_on_delete: bool


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, also recording each registration's URN and resource options."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: dict[str, Registration] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        self.registrations[request.name] = Registration(
            urn=response.urn, protect=bool(request.protect), retain_on_delete=bool(request.retainOnDelete)
        )
        return response


# Where the ARM name of each explicitly named resource type comes from (autonamed types get a suffix).
_NAME_INPUTS = {
    "ResourceGroup": "resourceGroupName",
    "Queue": "queueName",
    "Topic": "topicName",
    "Subscription": "subscriptionName",
    "Rule": "ruleName",
    "BlobContainer": "containerName",
    "Table": "tableName",
    "ManagementPolicy": "managementPolicyName",
    "BlobServiceProperties": "blobServicesName",
    "RoleAssignment": "roleAssignmentName",
    "RoleDefinition": "roleDefinitionId",
    "Subnet": "subnetName",
    "PrivateZone": "privateZoneName",
}


def _physical_name(args: pulumi.runtime.MockResourceArgs) -> str:
    kind = args.typ.rsplit(":", 1)[-1]
    if kind in _NAME_INPUTS:
        return str(args.inputs[_NAME_INPUTS[kind]])
    if kind == "DefaultRule":
        return "$Default"
    if kind == "StorageAccount":
        return f"{args.name}x1y2"  # autonaming appends a random suffix
    return f"{args.name}-a1b2"


def _resource_id(args: pulumi.runtime.MockResourceArgs, name: str) -> str:
    inputs = args.inputs
    group = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{inputs.get('resourceGroupName', 'rg')}"

    def namespace_of(namespace_name: object) -> str:
        return f"{group}/providers/Microsoft.ServiceBus/namespaces/{namespace_name}"

    def account_of(account_name: object) -> str:
        return f"{group}/providers/Microsoft.Storage/storageAccounts/{account_name}"

    namespace = namespace_of(inputs.get("namespaceName"))
    topic = f"{namespace}/topics/{inputs.get('topicName')}"
    subscription = f"{topic}/subscriptions/{inputs.get('subscriptionName')}"
    account = account_of(inputs.get("accountName"))
    site = f"{group}/providers/Microsoft.Web/sites/{inputs.get('name')}"
    ids: dict[str, Callable[[], str]] = {
        "azure-native:resources:ResourceGroup": lambda: group,
        "azure-native:servicebus:Namespace": lambda: namespace_of(name),
        "azure-native:servicebus:Queue": lambda: f"{namespace}/queues/{name}",
        "azure-native:servicebus:Topic": lambda: topic,
        "azure-native:servicebus:Subscription": lambda: subscription,
        "azure-native:servicebus:Rule": lambda: f"{subscription}/rules/{name}",
        "azure-native:servicebus:DefaultRule": lambda: f"{subscription}/rules/$Default",
        "azure-native:storage:StorageAccount": lambda: account_of(name),
        "azure-native:storage:BlobServiceProperties": lambda: f"{account}/blobServices/default",
        "azure-native:storage:BlobContainer": lambda: f"{account}/blobServices/default/containers/{name}",
        "azure-native:storage:Table": lambda: f"{account}/tableServices/default/tables/{name}",
        "azure-native:storage:ManagementPolicy": lambda: f"{account}/managementPolicies/default",
        "azure-native:network:VirtualNetwork": lambda: (
            f"{group}/providers/Microsoft.Network/virtualNetworks/{name}"
        ),
        "azure-native:network:Subnet": lambda: (
            f"{group}/providers/Microsoft.Network/virtualNetworks/{inputs.get('virtualNetworkName')}/subnets/{name}"
        ),
        "azure-native:privatedns:PrivateZone": lambda: (
            f"{group}/providers/Microsoft.Network/privateDnsZones/{name}"
        ),
        "azure-native:web:AppServicePlan": lambda: f"{group}/providers/Microsoft.Web/serverfarms/{name}",
        "azure-native:web:WebApp": lambda: f"{group}/providers/Microsoft.Web/sites/{name}",
        "azure-native:managedidentity:UserAssignedIdentity": lambda: (
            f"{group}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}"
        ),
        "azure-native:web:WebAppFtpAllowed": lambda: f"{site}/basicPublishingCredentialsPolicies/ftp",
        "azure-native:web:WebAppScmAllowed": lambda: f"{site}/basicPublishingCredentialsPolicies/scm",
        "azure-native:applicationinsights:Component": lambda: (
            f"{group}/providers/Microsoft.Insights/components/{name}"
        ),
        "azure-native:monitor:DiagnosticSetting": lambda: (
            f"{inputs.get('resourceUri')}/providers/Microsoft.Insights/diagnosticSettings/{inputs.get('name')}"
        ),
        # ARM answers a custom role's id at subscription level, whatever scope it was created at.
        "azure-native:authorization:RoleDefinition": lambda: (
            f"/subscriptions/{SUBSCRIPTION_ID}/providers/Microsoft.Authorization/roleDefinitions/{name}"
        ),
        "azure-native:authorization:RoleAssignment": lambda: (
            f"{inputs.get('scope')}/providers/Microsoft.Authorization/roleAssignments/{name}"
        ),
    }
    return ids.get(args.typ, lambda: f"{group}/providers/mock/{args.typ.rsplit(':', 1)[-1]}/{name}")()


class AzureMocks(pulumi.runtime.Mocks):
    def __init__(self, subscription_id: str = SUBSCRIPTION_ID, caller: str = LAPTOP_USER_OBJECT_ID) -> None:
        self.resources: list[Registered] = []
        self.subscription_id = subscription_id
        self.caller = caller

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        name = _physical_name(args)
        resource_id = _resource_id(args, name).replace(SUBSCRIPTION_ID, self.subscription_id)
        outputs: dict[str, Any] = {**args.inputs, "name": args.inputs.get("name", name)}
        if args.typ == "azure-native:servicebus:Namespace":
            outputs["serviceBusEndpoint"] = f"https://{name}.servicebus.windows.net:443/"
        elif args.typ == "azure-native:storage:StorageAccount":
            outputs["primaryEndpoints"] = {
                service: f"https://{name}.{service}.core.windows.net/"
                for service in ("blob", "table", "queue", "file", "dfs", "web")
            }
        elif args.typ == "azure-native:managedidentity:UserAssignedIdentity":
            outputs.update(principalId=APP_PRINCIPAL_ID, clientId=APP_IDENTITY_CLIENT_ID, tenantId=TENANT_ID)
        elif args.typ == "azure-native:web:WebApp":
            outputs["identity"] = {
                "type": "UserAssigned",
                "userAssignedIdentities": {
                    identity: {"principalId": APP_PRINCIPAL_ID, "clientId": APP_IDENTITY_CLIENT_ID}
                    for identity in args.inputs.get("identity", {}).get("userAssignedIdentities", [])
                },
            }
            outputs["defaultHostName"] = f"{name}.azurewebsites.net"
        elif args.typ == "azuread:index/applicationRegistration:ApplicationRegistration":
            outputs["clientId"] = API_CLIENT_ID
            outputs["objectId"] = "0bb1ec70-0000-4000-8000-00000000a001"
        elif args.typ == "azuread:index/servicePrincipal:ServicePrincipal":
            outputs["objectId"] = API_SERVICE_PRINCIPAL_ID
        elif args.typ == "azure-native:applicationinsights:Component":
            outputs["connectionString"] = (
                "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
                "IngestionEndpoint=https://westeurope-5.in.applicationinsights.azure.com/"
            )
        identity = outputs.get("identity")
        if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
            # ARM answers user-assigned identities as a map keyed by resource id (e.g. a namespace or
            # account reading a customer-managed key as one).
            outputs["identity"] = {
                **identity,
                "userAssignedIdentities": {
                    assigned: {"principalId": APP_PRINCIPAL_ID, "clientId": APP_IDENTITY_CLIENT_ID}
                    for assigned in identity["userAssignedIdentities"]
                },
            }
        self.resources.append(Registered(args.typ, args.name, resource_id, dict(args.inputs)))
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "subscriptionId": self.subscription_id,
                "tenantId": TENANT_ID,
                "clientId": "ci",
                "objectId": "ci",
            }, []
        if args.token == "azuread:index/getClientConfig:getClientConfig":
            return {"clientId": "ci", "objectId": self.caller, "tenantId": TENANT_ID}, []
        if args.token == "azure-native:resources:getResourceGroup":
            # An existing group, as ARM answers GET on it (the bootstrap created it).
            name = args.args["resourceGroupName"]
            group = f"/subscriptions/{self.subscription_id}/resourceGroups/{name}"
            return {"id": group, "name": name, "location": "westeurope", "type": "resourceGroups"}, []
        raise NotImplementedError(f"no mock for call {args.token}")


@dataclass
class ProgramRun:
    """What one offline run of the program registered and exported."""

    resources: list[Registered]
    outputs: dict[str, Any] = field(default_factory=dict)
    registrations: dict[str, Registration] = field(default_factory=dict)  # by logical name

    def of_type(self, suffix: str) -> list[Registered]:
        return [resource for resource in self.resources if resource.type.endswith(f":{suffix}")]

    def one(self, suffix: str, **inputs: Any) -> Registered:
        matches = [
            resource
            for resource in self.of_type(suffix)
            if all(resource.inputs.get(key) == value for key, value in inputs.items())
        ]
        assert len(matches) == 1, f"expected one {suffix} with {inputs}, found {len(matches)}"
        return matches[0]


def _ensure_event_loop() -> None:
    """Pulumi's mocks build futures on the thread's current event loop. A test that ran `asyncio.run()`
    earlier in the session (the MCP client's, the SDK conformance tests') leaves the main thread with none
    set, and Pulumi then fails with "There is no current event loop"; give the thread a fresh one."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


def run_program(
    program: Callable[[], dict[str, Any] | None],
    *,
    stack: str,
    config: dict[str, Any] | None = None,
    subscription_id: str = SUBSCRIPTION_ID,
    preview: bool = False,
    monitor_type: Callable[[AzureMocks], RecordingMonitor] = RecordingMonitor,
    caller: str = LAPTOP_USER_OBJECT_ID,
    arm_checked: bool = True,
) -> ProgramRun:
    """Runs `program` under mocks, with `config` as the stack's `claimcheck:*` config.

    The config goes where the Pulumi language host puts it for a real run: the PULUMI_CONFIG
    environment variable, a JSON object of strings (structured values JSON-encoded). `preview` runs
    it as `pulumi preview` does (outputs the monitor leaves out are unknown); `monitor_type` builds
    the resource monitor (tests/infra/policy_engine.py records what the engine would receive).

    The mocks accept any property bag, where ARM refuses some at `pulumi up`: unless `arm_checked` is
    off (a test that registers a refused shape on purpose), a run whose resources break a rule of
    infra/arm_rules.py raises ArmRejected, as the deployment would fail. Rules ARM applies that the
    table does not hold are not played (infra/arm_rules.py lists what it holds).
    """
    _ensure_event_loop()
    mocks = AzureMocks(subscription_id, caller)
    monitor = monitor_type(mocks)
    pulumi.runtime.set_mocks(mocks, project="claimcheck", stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config({})
    run = ProgramRun(resources=mocks.resources, registrations=monitor.registrations)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def declare() -> pulumi.Output[Any]:
        outputs = program() or {}
        return pulumi.Output.from_input(outputs).apply(run.outputs.update)

    encoded = {
        f"claimcheck:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in (config or {}).items()
    }
    previous = os.environ.get("PULUMI_CONFIG")
    os.environ["PULUMI_CONFIG"] = json.dumps(encoded)
    try:
        declare()
    finally:
        if previous is None:
            del os.environ["PULUMI_CONFIG"]
        else:
            os.environ["PULUMI_CONFIG"] = previous
    if arm_checked and not preview:
        refused = arm_rules.violations(run.resources)
        if refused:
            raise ArmRejected("\n".join(str(violation) for violation in refused))
    return run


class ArmRejected(AssertionError):
    """What ARM would refuse at `pulumi up` (infra/arm_rules.py): the run's resources break its rules."""
