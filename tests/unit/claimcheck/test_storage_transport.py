"""The storage clients' HTTP transport: requests' per-request environment lookups only when the
environment has something for them (claimcheck.adapters.azure._transport), and the clients' own
transport defaults kept (the storage SDK's read blocks and timeouts, the status reads' short leash)."""

from __future__ import annotations

from typing import Any

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from claimcheck.adapters import azure

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
