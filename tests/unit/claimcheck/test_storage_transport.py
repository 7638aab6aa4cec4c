"""The storage clients' HTTP transport: requests' per-request environment lookups only when the
environment has something for them (claimcheck.adapters.azure._transport), and the clients' own
transport defaults kept (the storage SDK's read blocks and timeouts, the status reads' short leash), and
a connection pool per host sized to the worker's concurrency (claimcheck.adapters.azure._pooled_session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from azure.core.pipeline.transport import RequestsTransport
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from claimcheck import Settings
from claimcheck.adapters import azure
from requests.adapters import HTTPAdapter

from local.functions_host.host_config import read_host_json

HOST_JSON = Path(__file__).resolve().parents[3] / "functions" / "host.json"

CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


@pytest.fixture
def no_transport_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*azure.PROXY_VARIABLES, *azure.CA_BUNDLE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _transport_of(client: Any) -> Any:
    # The SDKs keep the transport they built on their pipeline (private: no public accessor).
    pipeline = client._pipeline if isinstance(client, BlobServiceClient) else client._client._client._pipeline
    return pipeline._transport


def test_without_proxy_variables_the_session_skips_the_environment(
    no_transport_variables: pytest.MonkeyPatch,
) -> None:
    blobs = _transport_of(BlobServiceClient.from_connection_string(CONNECTION, **azure._transport()))
    assert blobs._use_env_settings is False
    # The storage SDK's own transport defaults stay (256 KiB read blocks: 4 KiB doubled the CPU of a
    # 100 MB download when a transport of our own replaced them).
    assert (blobs.connection_config.data_block_size, blobs.connection_config.read_timeout) == (256 * 1024, 60)
    assert blobs.connection_config.verify is True


def test_the_status_reads_keep_their_short_leash(no_transport_variables: pytest.MonkeyPatch) -> None:
    options = {**azure.STATUS_READ_LIMITS, **azure._transport()}
    status = _transport_of(TableServiceClient.from_connection_string(CONNECTION, **options))
    assert status._use_env_settings is False
    assert (status.connection_config.timeout, status.connection_config.read_timeout) == (3, 10)


def test_a_ca_bundle_variable_is_read_once_and_kept(no_transport_variables: pytest.MonkeyPatch) -> None:
    no_transport_variables.setenv("CURL_CA_BUNDLE", "/etc/curl-bundle.pem")
    no_transport_variables.setenv("REQUESTS_CA_BUNDLE", "/etc/requests-bundle.pem")
    assert azure._transport()["connection_verify"] == "/etc/requests-bundle.pem"  # requests' precedence


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "no_proxy"])
def test_a_proxy_variable_keeps_the_per_request_lookup(
    no_transport_variables: pytest.MonkeyPatch, variable: str
) -> None:
    no_transport_variables.setenv(variable, "http://proxy.example:3128")
    assert azure._transport() == {}


def _pool_sizes(transport: Any) -> dict[str, int]:
    sizes = {}
    for prefix in ("http://", "https://"):
        adapter = transport.session.get_adapter(prefix + "account.example")
        assert isinstance(adapter, HTTPAdapter)
        sizes[prefix] = adapter.poolmanager.connection_pool_kw["maxsize"]
    return sizes


def test_every_storage_client_pools_the_settings_connections_per_host(
    no_transport_variables: pytest.MonkeyPatch,
) -> None:
    storage = azure.connect_storage(
        Settings(environment="test", storage_pool_connections=48), storage_connection=CONNECTION
    )
    table: Any = storage.tables.registry._client  # type: ignore[attr-defined]
    status: Any = storage.status_tables.registry._client  # type: ignore[attr-defined]
    blob = _transport_of(storage.staging._service)
    # A table client got from its service client wraps the service's transport.
    tables = [client._client._client._pipeline._transport._transport for client in (table, status)]
    for transport in (blob, *tables):
        assert _pool_sizes(transport) == {"http://": 48, "https://": 48}
        assert transport.session.trust_env is False
    # Each client its own session: closing one client must not close another's.
    assert len({id(transport.session) for transport in (blob, *tables)}) == 3
    # The clients' own transport defaults stay around the session.
    assert blob.connection_config.data_block_size == 256 * 1024
    assert tables[1].connection_config.timeout == azure.STATUS_READ_LIMITS["connection_timeout"]


def test_the_pooled_session_keeps_azure_cores_adapter_and_the_environment_choice() -> None:
    default = RequestsTransport()
    default.open()
    theirs = default.session.get_adapter("https://a")
    session = azure._pooled_session(33, trust_env=True)
    ours = session.get_adapter("https://a")
    assert type(ours) is type(theirs)
    assert isinstance(ours, HTTPAdapter)
    assert isinstance(theirs, HTTPAdapter)
    assert ours.max_retries.total == theirs.max_retries.total
    assert ours.poolmanager.connection_pool_kw["maxsize"] == 33
    assert session.trust_env is True
    assert azure._pooled_session(33, trust_env=False).trust_env is False


def test_the_default_pool_covers_what_host_json_runs_at_once() -> None:
    host = read_host_json(HOST_JSON)
    at_once = (
        host.service_bus.max_concurrent_sessions
        + host.service_bus.max_concurrent_calls
        + host.http.max_concurrent_requests
    )
    assert Settings(environment="test").storage_pool_connections >= at_once
