"""Azure SDK construction: the Blob and Table clients behind the storage ports, and the storage a
stack provisions.

``connect_storage`` only builds clients (no request is sent): from a connection string (Azurite) or
from service URIs with a token credential (Azure, ``DefaultAzureCredential`` unless one is given).
``provision_storage`` creates the payload container and the tables; it belongs to the deploy side
(the local stack and the test harnesses call it; on Azure ``infra/`` declares them), never to a
request.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from azure.core.credentials import TokenCredential
from azure.core.pipeline.transport import RequestsTransport
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from requests.adapters import HTTPAdapter

from claimcheck.adapters.blobs import AzureBlobPayloadStore
from claimcheck.adapters.staging import AzureBlobStagingArea
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.routing import PayloadRoutes, PayloadStores
from claimcheck.settings import Settings, SettingsError
from claimcheck.storage import Tables

# The status API reads on its own short leash: when the authoritative table is unreachable an agent
# gets a 503 with Retry-After in seconds (and asks again), never a stale answer and never a request
# that hangs through the SDK's default retries for minutes.
STATUS_READ_LIMITS: dict[str, Any] = {"retry_total": 1, "connection_timeout": 3, "read_timeout": 10}

# The level of azure-core's per-request HTTP logs (HttpLoggingPolicy: the request's URL, which names the
# stored object, and its headers, then the response's). The SDK's default is INFO, the level the Azure
# Functions Python worker sets on the root logger: every storage request of the hot path would format
# two records and ship them to the host (and Application Insights). At DEBUG they appear only when
# debug logging is on (PYTHON_ENABLE_DEBUG_LOGGING on Azure).
STORAGE_HTTP_LOG_LEVEL = logging.DEBUG

# Proxy variables requests would look up in the environment on every request (their exceptions too).
PROXY_VARIABLES = tuple(
    name for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower())
)
# The CA bundle variables requests honours, in its order of precedence.
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


@dataclass(frozen=True)
class AzureStorage:
    """The ports on Azure Blob and Table Storage; ``status_tables`` use the status read's limits."""

    store: PayloadStores  # one per container, routed by purpose (claimcheck.routing)
    tables: Tables
    status_tables: Tables
    staging: AzureBlobStagingArea


def connect_storage(
    settings: Settings,
    *,
    storage_connection: str | None = None,
    blob_service_uri: str | None = None,
    table_service_uri: str | None = None,
    credential: object | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    request_hook: Callable[[str, Any], None] | None = None,
) -> AzureStorage:
    """The ports over the settings' container and tables.

    ``request_hook(service, request)``: called with ``"blob"`` or ``"table"`` and azure-core's
    ``PipelineRequest`` for every storage request actually sent (once per attempt);
    local/storage_requests.py counts the hot path's round trips with it.
    """
    # Bounded transfers: the SDK never buffers more than one chunk per request.
    transfer: dict[str, Any] = {
        "max_single_get_size": chunk_bytes,
        "max_chunk_get_size": chunk_bytes,
        "max_block_size": chunk_bytes,
        "max_single_put_size": chunk_bytes,
    }
    table_options: dict[str, Any] = {}
    status_options = dict(STATUS_READ_LIMITS)
    for options in (transfer, table_options, status_options):
        options.update(_transport())
        options["http_logging_level"] = STORAGE_HTTP_LOG_LEVEL
        trust_env = options.get("use_env_settings", True)
        options["session"] = _pooled_session(settings.storage_pool_connections, trust_env=trust_env)
    if request_hook is not None:
        transfer["raw_request_hook"] = functools.partial(request_hook, "blob")
        table_options["raw_request_hook"] = functools.partial(request_hook, "table")
    if storage_connection is not None:
        blobs = BlobServiceClient.from_connection_string(storage_connection, **transfer)
        tables = TableServiceClient.from_connection_string(storage_connection, **table_options)
        status_tables = TableServiceClient.from_connection_string(storage_connection, **status_options)
    else:
        if blob_service_uri is None or table_service_uri is None:
            raise SettingsError("give storage_connection, or both blob_service_uri and table_service_uri")
        token = _token_credential(credential)
        blobs = BlobServiceClient(blob_service_uri, credential=token, **transfer)
        tables = TableServiceClient(table_service_uri, credential=token, **table_options)
        status_tables = TableServiceClient(table_service_uri, credential=token, **status_options)
    routes = PayloadRoutes.from_settings(settings)
    containers = {name: blobs.get_container_client(name) for name in routes.containers()}
    stores = PayloadStores(
        routes,
        {
            name: AzureBlobPayloadStore(
                container, chunk_bytes=chunk_bytes, provisional_tag=settings.provisional_tag
            )
            for name, container in containers.items()
        },
    )
    container = containers[routes.default]
    return AzureStorage(
        store=stores,
        tables=_tables(tables, settings),
        status_tables=_tables(status_tables, settings),
        staging=AzureBlobStagingArea(blobs, container),
    )


def _transport() -> dict[str, Any]:
    """Client options that spare each request requests' environment lookups when there is nothing to
    find there.

    With ``trust_env`` (the default) requests scans the environment for proxies and stats ~/.netrc on
    every request, a measurable share of each storage round trip's client CPU. With no proxy variable
    set that lookup can only come back empty, so the session skips it (``use_env_settings``); the CA
    bundle variables are read once here instead (same precedence as requests). With a proxy variable
    the default per-request lookup stays. These are client options, not a transport of our own: the
    client builds its transport with them and keeps its own defaults (the storage SDK's timeouts and
    256 KiB read blocks, the status reads' short leash).
    """
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return {}
    bundle = next((os.environ[name] for name in CA_BUNDLE_VARIABLES if os.environ.get(name)), None)
    return {"use_env_settings": False, **({} if bundle is None else {"connection_verify": bundle})}


def _pooled_session(pool_connections: int, *, trust_env: bool) -> requests.Session:
    """A requests session as azure-core sets one up, keeping ``pool_connections`` per host.

    requests keeps 10 connections per host by default; a worker running more storage calls at once
    discards the surplus after each call and opens new ones (urllib3's "Connection pool is full", on
    Azure a new TLS handshake each), and azure-core has no option for the pool's size. So azure-core
    sets up a session (its retry-free, bigger-block adapters) and the adapters are mounted again with
    the pool's size; the client builds its transport around the session (its own timeouts and blocks
    stay) and owns it: the session closes with its client. Hence one session per client: shared, the
    first client closed would close it for the others (and the Blob and Table endpoints are different
    hosts, pooled apart anyway).
    """
    setup = RequestsTransport(use_env_settings=trust_env)
    setup.open()  # creates azure-core's session; the transport object itself is not used
    session: requests.Session = setup.session
    for prefix, adapter in list(session.adapters.items()):
        if isinstance(adapter, HTTPAdapter):
            session.mount(
                prefix, type(adapter)(pool_maxsize=pool_connections, max_retries=adapter.max_retries)
            )
    return session


def _token_credential(credential: object | None) -> TokenCredential:
    """The given azure-core credential, or ``DefaultAzureCredential`` (managed identity on Azure)."""
    if credential is None:
        from azure.identity import DefaultAzureCredential

        return DefaultAzureCredential()
    if not isinstance(credential, TokenCredential):
        raise SettingsError(
            f"credential must be an azure-core TokenCredential, not {type(credential).__name__}"
        )
    return credential


def provision_storage(settings: Settings, storage_connection: str) -> None:
    """Create the settings' payload containers (each purpose's own too) and tables where missing
    (idempotent)."""
    blobs = BlobServiceClient.from_connection_string(storage_connection)
    for name in PayloadRoutes.from_settings(settings).containers():
        container = blobs.get_container_client(name)
        if not container.exists():
            container.create_container()
    tables = TableServiceClient.from_connection_string(storage_connection)
    for name in table_names(settings):
        tables.create_table_if_not_exists(name)


def table_names(settings: Settings) -> tuple[str, ...]:
    return (
        settings.registry_table,
        settings.idempotency_table,
        settings.work_items_table,
        settings.audit_table,
        settings.results_table,
    )


def _tables(service: TableServiceClient, settings: Settings) -> Tables:
    def table(name: str) -> AzureEntityTable:
        return AzureEntityTable(service.get_table_client(name))

    return Tables(
        registry=table(settings.registry_table),
        idempotency=table(settings.idempotency_table),
        work_items=table(settings.work_items_table),
        audit=table(settings.audit_table),
        results=table(settings.results_table),
    )
