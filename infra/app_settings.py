"""The Function App's app settings, computed from plain strings (pure, so tests and the binding check
use exactly what the infrastructure sets).

Identity-based connections only: each connection name expands to `<NAME>__<property>` settings that
the Functions host and the claimcheck adapters resolve with the app's managed identity. The identity
is user-assigned (created before the app, so its principal id can be an app setting without a
cycle), so every connection also names it: `<NAME>__credential=managedidentity` and
`<NAME>__clientId` for the host's bindings, AZURE_CLIENT_ID for DefaultAzureCredential in the
claimcheck adapters, `ClientId=` in APPLICATIONINSIGHTS_AUTHENTICATION_STRING for telemetry.
No value carries a key, a SAS token or a storage connection string. The Application Insights
connection string holds only the instrumentation key and endpoints; with local auth disabled on the
component, ingestion needs the Entra token that APPLICATIONINSIGHTS_AUTHENTICATION_STRING asks for.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from claimcheck.access import ACCESS_TABLE_SETTING, AccessTable
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.settings import (
    AUDIENCE_SETTING,
    HOST_REQUEST_LIMIT_SETTING,
    INLINE_REQUEST_MAX_BYTES,
    ISSUER_SETTING,
    JWKS_URI_SETTING,
    SERVICEBUS_CONNECTION,
    STORAGE_CONNECTION,
    ProvisionalTag,
    Settings,
    consumer_settings,
    host_request_body_limit,
)

from infra.topology import Topology


@dataclass(frozen=True)
class AppEndpoints:
    service_bus_fqdn: str  # <namespace>.servicebus.windows.net
    payload_blob_uri: str  # https://<account>.blob.core.windows.net
    payload_table_uri: str  # https://<account>.table.core.windows.net
    host_storage_account: str  # the AzureWebJobsStorage / deployment account
    app_insights_connection_string: str


@dataclass(frozen=True)
class AppIdentity:
    """The app's user-assigned managed identity."""

    client_id: str  # what the host and azure-identity ask tokens for
    principal_id: str  # its service principal's object id: role assignments, the consumer identity


# Every connection the host resolves with the identity (the binding connections and its own storage).
IDENTITY_CONNECTIONS = ("AzureWebJobsStorage", SERVICEBUS_CONNECTION, STORAGE_CONNECTION)


def identity_settings(identity: AppIdentity, consumed_purposes: Collection[str]) -> dict[str, str]:
    """Which managed identity every connection uses, and that it is the consumer of the purposes the
    stack consumes (claimcheck:consumedPurposes), the others having none."""
    return {
        **{
            f"{connection}__{key}": value
            for connection in IDENTITY_CONNECTIONS
            for key, value in (("credential", "managedidentity"), ("clientId", identity.client_id))
        },
        "AZURE_CLIENT_ID": identity.client_id,
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": f"ClientId={identity.client_id};Authorization=AAD",
        # The consumer checks its own identity against each purpose's allowed consumers.
        **consumer_settings(identity.principal_id, DEFAULT_PURPOSES, consumed_purposes),
    }


def service_bus_fqdn(endpoint: str) -> str:
    """`https://ns.servicebus.windows.net:443/` (the namespace's serviceBusEndpoint) -> the host name."""
    host = endpoint.split("://", 1)[-1]
    return host.split("/", 1)[0].split(":", 1)[0]


def topology_settings(
    topology: Topology,
    environment: str,
    immutable_containers: Mapping[str, int] | None = None,
    max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES,
) -> Settings:
    """The app's settings as the topology and the stack give them (defaults for everything else): its
    `to_env()` is what infra/ writes as app settings and the local stack into local.settings.json."""
    bindings, tables, lifecycle = topology.bindings, topology.tables, topology.lifecycle
    return Settings(
        environment=environment,
        documents_queue=bindings.documents_queue,
        results_topic=bindings.results_topic,
        payload_container=bindings.payload_container,
        registry_table=tables.registry,
        idempotency_table=tables.idempotency,
        work_items_table=tables.work_items,
        audit_table=tables.audit,
        results_table=tables.results,
        # The consumer dead-letters on the last delivery itself, so it must know the queue's limit.
        max_delivery_count=topology.queue(bindings.documents_queue).max_delivery_count,
        # The tag the lifecycle rule's orphan filter matches: from the topology, so an override reaches
        # the rule and the app alike.
        provisional_tag=ProvisionalTag(lifecycle.provisional_tag_name, lifecycle.provisional_tag_value),
        purpose_containers=dict(bindings.purpose_containers),
        immutable_containers=dict(immutable_containers or {}),
        max_inline_request_bytes=max_inline_request_bytes,
    )


def static_app_settings(
    topology: Topology,
    environment: str,
    immutable_containers: Mapping[str, int] | None = None,
    max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES,
) -> dict[str, str]:
    """The settings the stack config alone decides: known in a first `pulumi preview`, so the policy
    pack checks their values there too."""
    settings = topology_settings(topology, environment, immutable_containers, max_inline_request_bytes)
    return settings.to_env() | {
        # The Functions host's own request-body limit, from the same inline cap the app enforces: on
        # Azure the worker gets the whole body with the invocation, so this is what bounds its memory.
        HOST_REQUEST_LIMIT_SETTING: str(host_request_body_limit(settings.max_inline_request_bytes)),
        # The Python worker (3.8-3.12) imports its own protobuf 4.x first; the Service Bus SDK-type
        # extension's settlement stubs (ServiceBusMessageActions) are protobuf 6 gencode and fail to
        # load against it. This setting makes the worker load the app's packages (protobuf 6, grpcio)
        # first, as the extension's settlement sample does; Python 3.13+ isolates by itself.
        # PYTHON_ENABLE_INIT_INDEXING is not needed: it only moves function indexing to worker start
        # for HTTP streaming (the FastAPI extension); SDK-type bindings are indexed either way.
        "PYTHON_ISOLATE_WORKER_DEPENDENCIES": "1",
        # OpenTelemetry (host.json telemetryMode OpenTelemetry): the worker runs each invocation in the
        # host's trace context, so the app's spans (claimcheck.telemetry) join the host's request or
        # Service Bus trigger span, and it exports its own logs, spans and metrics through the Azure
        # Monitor distro (claimcheck.adapters.telemetry_setup, Entra ID as
        # APPLICATIONINSIGHTS_AUTHENTICATION_STRING says) instead of the host forwarding the worker's logs.
        "PYTHON_ENABLE_OPENTELEMETRY": "true",
    }


def resource_app_settings(
    endpoints: AppEndpoints,
    identity: AppIdentity,
    consumed_purposes: Collection[str] = tuple(DEFAULT_PURPOSES),
) -> dict[str, str]:
    """The settings the stack's resources decide (endpoints, the identity's ids): their values are
    known only once the resources exist, their names always (``RESOURCE_SETTING_NAMES``)."""
    return {
        **identity_settings(identity, consumed_purposes),
        "AzureWebJobsStorage__accountName": endpoints.host_storage_account,
        f"{SERVICEBUS_CONNECTION}__fullyQualifiedNamespace": endpoints.service_bus_fqdn,
        f"{STORAGE_CONNECTION}__blobServiceUri": endpoints.payload_blob_uri.rstrip("/"),
        f"{STORAGE_CONNECTION}__tableServiceUri": endpoints.payload_table_uri.rstrip("/"),
        "APPLICATIONINSIGHTS_CONNECTION_STRING": endpoints.app_insights_connection_string,
    }


def build_app_settings(
    endpoints: AppEndpoints,
    identity: AppIdentity,
    topology: Topology,
    environment: str,
    consumed_purposes: Collection[str] = tuple(DEFAULT_PURPOSES),
    immutable_containers: Mapping[str, int] | None = None,
    max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES,
) -> dict[str, str]:
    """Every app setting but the token gate's (``auth_settings``), as plain strings."""
    return static_app_settings(
        topology, environment, immutable_containers, max_inline_request_bytes
    ) | resource_app_settings(endpoints, identity, consumed_purposes)


@dataclass(frozen=True)
class ApiAuth:
    """How the app validates bearer tokens (claimcheck.auth) and who may use which tenants."""

    issuer: str  # https://login.microsoftonline.com/<tenant>/v2.0
    audiences: str  # "api://<client id>,<client id>"
    jwks_uri: str  # https://login.microsoftonline.com/<tenant>/discovery/v2.0/keys
    access_table: AccessTable


def auth_settings(auth: ApiAuth) -> dict[str, str]:
    """The identity app settings: one source of truth is the stack config's producerPrincipals."""
    return {
        ISSUER_SETTING: auth.issuer,
        AUDIENCE_SETTING: auth.audiences,
        JWKS_URI_SETTING: auth.jwks_uri,
        ACCESS_TABLE_SETTING: auth.access_table.to_json(),
    }


def resource_setting_names(consumed_purposes: Collection[str] = tuple(DEFAULT_PURPOSES)) -> tuple[str, ...]:
    """The names ``resource_app_settings`` and ``auth_settings`` write, before any value is known (a
    first preview): read off the functions themselves, whose names never depend on the values."""
    placeholder = "known-once-the-resources-exist"
    endpoints = AppEndpoints(*(placeholder,) * 5)
    names = resource_app_settings(endpoints, AppIdentity(placeholder, placeholder), consumed_purposes)
    return (*names, *auth_settings(ApiAuth(placeholder, placeholder, placeholder, AccessTable(()))))
