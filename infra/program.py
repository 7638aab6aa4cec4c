"""The whole stack: settings and topology in, components declared, outputs exported."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pulumi
from claimcheck.access import AccessTable
from pulumi_azure_native import authorization, resources

from infra.app_settings import ApiAuth
from infra.components.access import Access, Grant
from infra.components.function_app import FunctionApp
from infra.components.identity import ApiIdentity
from infra.components.messaging import Messaging
from infra.components.network import PrivateNetwork, PrivateTarget
from infra.components.observability import Alerts, Monitoring
from infra.components.storage import PayloadStorage
from infra.roles import PAYLOAD_OPERATOR, BuiltInRole
from infra.stack_config import ProducerPrincipal, StackSettings
from infra.tags import stack_tags, tagging

# The tenant `claimcheck-ops smoke` submits for (scripts/ops_release.py's default).
SMOKE_TENANT = "smoke-test"


def deploy(settings: StackSettings) -> dict[str, Any]:
    """Declares every resource and exports (and returns) the stack outputs."""
    topology = settings.topology
    # Logical names come from the stack name, never from `environment`: a config edit must not rename
    # (and so replace) anything. Storage account names are 3-24 lower-case letters and digits, globally
    # unique: Pulumi appends a random suffix to these short logical names.
    prefix = f"claimcheck-{settings.stack_slug}"
    short_env = re.sub(r"[^a-z0-9]", "", settings.stack_slug)[:8]
    # Outside dev the data-bearing resources are protected: a delete or a replacement (e.g. a changed
    # resource group name) stops `pulumi up` instead of losing payloads or in-flight messages.
    # Tags on every resource that takes them: each top-level declaration gets the transformation and
    # hands it to the resources its component declares.
    tagged = pulumi.ResourceOptions(
        transformations=[tagging(stack_tags(settings.environment, settings.owner, settings.cost_center))]
    )
    stateful = pulumi.ResourceOptions(protect=settings.protect_stateful_resources)
    # Their children that hold data (queues, topics, subscriptions, containers, tables): protected
    # likewise, and retained on delete everywhere, so a topology rename (a new entity) leaves the old
    # one and its data in Azure instead of deleting it; outside dev protect refuses the rename outright.
    stateful_children = stateful.merge(pulumi.ResourceOptions(retain_on_delete=True))
    # The bootstrap creates the group when it scopes the CI identities to it: then it is only read.
    group: resources.ResourceGroup | resources.AwaitableGetResourceGroupResult = (
        resources.ResourceGroup(
            prefix, resource_group_name=settings.resource_group_name, location=settings.location, opts=tagged
        )
        if settings.create_resource_group
        else resources.get_resource_group(resource_group_name=settings.resource_group_name)
    )
    rg, location = group.name, settings.location

    monitoring = Monitoring(
        f"{prefix}-monitoring",
        resource_group_name=rg,
        location=location,
        retention_days=settings.log_retention_days,
        alert_emails=settings.alert_emails,
        private_ingestion=settings.private_networking,
        opts=tagged,
    )
    messaging = Messaging(
        f"{prefix}-messaging",
        resource_group_name=rg,
        location=location,
        sku=settings.service_bus_sku,
        capacity=settings.service_bus_capacity,
        public_network_access=settings.public_network_access,
        topology=topology,
        zone_redundant=settings.zone_redundant,
        customer_managed_key=settings.customer_managed_key,
        namespace_opts=stateful,
        entity_opts=stateful_children,
        opts=tagged,
    )
    network = (
        PrivateNetwork(
            f"{prefix}-network",
            resource_group_name=rg,
            location=location,
            address_space=settings.vnet_address_space,
            opts=tagged,
        )
        if settings.private_networking
        else None
    )
    payloads = PayloadStorage(
        f"{prefix}-storage",
        resource_group_name=rg,
        location=location,
        sku=settings.storage_sku,
        account_logical_name=f"ccpay{short_env}",
        infrastructure_encryption=settings.require_infrastructure_encryption,
        public_network_access=settings.public_network_access,
        blob_delete_retention_days=settings.blob_delete_retention_days,
        container_delete_retention_days=settings.container_delete_retention_days,
        immutable_containers=settings.immutable_containers(),
        customer_managed_key=settings.customer_managed_key,
        topology=topology,
        account_opts=stateful,
        data_opts=stateful_children,
        opts=tagged,
    )
    # The API's Entra ID app registration; its audience, issuer and the producers' access grants go into
    # the app settings that claimcheck.auth and claimcheck.access read.
    callers = api_callers(settings)
    api = ApiIdentity(
        f"{prefix}-api",
        environment=settings.environment,
        tenant_id=authorization.get_client_config_output().tenant_id,
        callers=callers,
        owners=settings.api_owner_object_ids,
        group_claims=bool(settings.group_grants),
    )
    access_table = AccessTable(
        tuple(grant for caller in callers if (grant := caller.grant()) is not None) + settings.group_grants
    )
    auth = pulumi.Output.all(api.issuer, api.audiences, api.jwks_uri).apply(
        lambda values: ApiAuth(
            issuer=values[0], audiences=values[1], jwks_uri=values[2], access_table=access_table
        )
    )
    functions = FunctionApp(
        f"{prefix}-functions",
        resource_group_name=rg,
        location=location,
        host_account_logical_name=f"cchost{short_env}",
        storage_sku=settings.storage_sku,
        topology=topology,
        environment=settings.environment,
        service_bus_fqdn=messaging.namespace_fqdn,
        payload_blob_endpoint=payloads.blob_endpoint,
        payload_table_endpoint=payloads.table_endpoint,
        app_insights_connection_string=monitoring.app_insights.connection_string,
        maximum_instances=settings.function_maximum_instances,
        instance_memory_mb=settings.function_instance_memory_mb,
        auth=auth,
        consumed_purposes=settings.consumed_purposes,
        zone_redundant=settings.zone_redundant,
        infrastructure_encryption=settings.require_infrastructure_encryption,
        consumer_always_ready=settings.consumer_always_ready,
        public_network_access=settings.public_network_access,
        integration_subnet_id=network.integration_subnet.id if network else None,
        immutable_containers=settings.immutable_containers(),
        max_inline_request_bytes=settings.max_inline_request_bytes,
        opts=tagged,
    )
    if network is not None:
        # What each resource serves the app: the namespace (AMQP and management); blobs and tables of
        # payloads; blobs (package, host state, timer leases), queues and tables of the host account.
        for target in (
            PrivateTarget("servicebus", messaging.namespace.id, ("namespace",)),
            PrivateTarget("payloads", payloads.account.id, ("blob", "table")),
            PrivateTarget("host", functions.host_account.id, ("blob", "queue", "table")),
        ):
            network.connect(target)
        # Telemetry too: the component and its workspace in an Azure Monitor Private Link Scope.
        network.link_monitoring({"appi": monitoring.app_insights.id, "logs": monitoring.workspace.id})

    bindings = topology.bindings
    documents_queue = messaging.queues[bindings.documents_queue].id
    results_topic = messaging.topics[bindings.results_topic].id
    # Every container holding payloads: the shared one (grant names kept, so nothing is replaced) and each
    # purpose's own (evidence), suffixed by its name.
    payload_containers = {
        "" if container == bindings.payload_container else f"-{container}": payloads.containers[container].id
        for container in bindings.payload_containers()
    }
    app = functions.principal_id
    grants = [
        # The trigger receives, the HTTP intake publishes, and target-based scaling reads the queue's
        # runtime properties with the app's identity: the Functions Service Bus extension's
        # ServiceBusMetricsProvider calls GetQueueRuntimePropertiesAsync, which needs the Manage claim
        # (its warning: "does not have 'Manage Claim' ... Unable to determine active message count").
        # Only Azure Service Bus Data Owner carries it (the binding docs list it beside Receiver for
        # triggers), held here on this one queue. docs/deploy.md, "Operator access and scaling".
        Grant("app-own-documents", BuiltInRole.SERVICE_BUS_DATA_OWNER, documents_queue, app),
        Grant("app-send-results", BuiltInRole.SERVICE_BUS_DATA_SENDER, results_topic, app),
        # Blob Data Contributor lacks the blob index tag actions the provisional/active state needs.
        *[
            Grant(f"app-payload-blobs{suffix}", PAYLOAD_OPERATOR, container_id, app)
            for suffix, container_id in payload_containers.items()
        ],
        # Direct uploads: the app signs write-only user delegation SAS for one staging blob. Get User
        # Delegation Key is a storage-account operation (POST /?restype=service&comp=userdelegationkey),
        # so the account is the narrowest scope it can be granted at; the key grants nothing by itself, and
        # a SAS it signs is capped by the app's own roles (the payload operator role on the container).
        Grant("app-payload-delegator", BuiltInRole.STORAGE_BLOB_DELEGATOR, payloads.account.id, app),
        *[
            Grant(f"app-table-{table}", BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR, resource.id, app)
            for table, resource in payloads.tables.items()
        ],
        Grant("app-host-storage", BuiltInRole.STORAGE_BLOB_DATA_OWNER, functions.host_account.id, app),
        Grant("app-telemetry", BuiltInRole.MONITORING_METRICS_PUBLISHER, monitoring.app_insights.id, app),
    ]
    # Producer principals get no data-plane role: the documents queue and the registry, work-item and
    # idempotency tables are what the consumer checks every message against, so only the app writes them
    # (Azure Table RBAC is per table, not per row: a producer writing the work-item table could write any
    # tenant's receipts). Producers submit through the HTTP API, as the app's identity: app roles and an
    # access-table grant (infra/components/identity.py). docs/architecture.md, "The queue is untrusted
    # input"; tests/infra/test_truth_writers.py.
    # The smoke identities get no Azure role either: the smoke test goes through the HTTP API only
    # (their app roles and access-table grant come from api_callers), so it works with a private namespace.
    grants += operator_grants(settings, messaging)
    Access(
        f"{prefix}-access",
        grants=grants,
        custom_role_scope=group.id,
        create_custom_roles=settings.create_custom_roles,
        stack_label=f"{pulumi.get_project()}/{pulumi.get_stack()}",
    )
    Alerts(
        f"{prefix}-alerts",
        resource_group_name=group.name,
        monitoring=monitoring,
        namespace_id=messaging.namespace.id,
        payload_account_id=payloads.account.id,
        function_app_id=functions.app.id,
        backlog_threshold=settings.backlog_alert_threshold,
        location=location,
        provisional_grace_days=topology.lifecycle.provisional_grace_days,
        opts=tagged,
    )

    outputs: dict[str, Any] = {
        "resourceGroupName": group.name,
        "serviceBusNamespace": messaging.namespace.name,
        "serviceBusFqdn": messaging.namespace_fqdn,
        "documentsQueue": bindings.documents_queue,
        "resultsTopic": bindings.results_topic,
        "queues": [queue.name for queue in topology.queues],
        "subscriptions": {topic.name: [sub.name for sub in topic.subscriptions] for topic in topology.topics},
        "payloadStorageAccount": payloads.account.name,
        "payloadBlobEndpoint": payloads.blob_endpoint,
        "payloadTableEndpoint": payloads.table_endpoint,
        "payloadContainer": bindings.payload_container,
        # Purposes with a container of their own, and the days each locked (WORM) container keeps a version.
        "purposeContainers": dict(bindings.purpose_containers),
        "immutableContainers": settings.immutable_containers(),
        # How long an app delete stays recoverable: as a previous version until the lifecycle rule
        # deletes it, then soft-deleted (docs/deploy.md, "Storage rules").
        "deletedPayloadRecoverableDays": (
            topology.lifecycle.old_versions_delete_after_days + settings.blob_delete_retention_days
        ),
        "tables": list(topology.tables.all()),
        "functionAppName": functions.app.name,
        "functionAppId": functions.app.id,
        "functionAppHostName": functions.app.default_host_name,
        "functionAppPrincipalId": functions.principal_id,
        "deploymentStorageAccount": functions.host_account.name,
        "producerPrincipalIds": [producer.object_id for producer in settings.producer_principals],
        # What callers need: the token audience (`<apiAudience>/.default` is the scope to ask Entra
        # for), the API's client id, the issuer the app trusts and the app roles it checks.
        "apiAudience": api.audience,
        "apiClientId": api.registration.client_id,
        "apiIssuer": api.issuer,
        "apiAppRoles": [role.value for role in api.roles],
        "privateNetworking": settings.private_networking,
    }
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def operator_grants(settings: StackSettings, messaging: Messaging) -> list[Grant]:
    """What `claimcheck-ops` needs per operator, entity by entity: `dlq list/show/replay` and `peek`
    receive (peek-lock) from a queue's or subscription's dead-letter queue and send the copy back to the
    queue or the subscription's topic; `stats` reads runtime properties (message counts), which need
    the Manage claim, so Data Owner on each queue and subscription. Sender on each topic for the
    replayed copy of a subscription's message. Nothing on payloads or tables."""
    grants: list[Grant] = []
    for operator in settings.operator_principals:
        who, principal, kind = f"operator-{operator.name}", operator.object_id, operator.principal_type
        owner, sender = BuiltInRole.SERVICE_BUS_DATA_OWNER, BuiltInRole.SERVICE_BUS_DATA_SENDER
        grants += [
            Grant(f"{who}-queue-{name}", owner, queue.id, principal, kind)
            for name, queue in messaging.queues.items()
        ]
        grants += [
            Grant(f"{who}-topic-{name}", sender, topic.id, principal, kind)
            for name, topic in messaging.topics.items()
        ]
        grants += [
            Grant(f"{who}-sub-{path.replace('/', '-')}", owner, subscription.id, principal, kind)
            for path, subscription in messaging.subscriptions.items()
        ]
    return grants


def api_callers(settings: StackSettings) -> tuple[ProducerPrincipal, ...]:
    """Who gets app roles on the API and an access-table grant: the producer principals, and the smoke
    test identities (which submit for the tenant `smoke-test` unless their entry names tenants)."""
    smoke = tuple(
        principal if principal.tenants else replace(principal, tenants=(SMOKE_TENANT,))
        for principal in settings.smoke_test_principals
    )
    return settings.producer_principals + smoke
