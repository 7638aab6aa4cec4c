"""The storage clients' HTTP transport: requests' per-request environment lookups only when the
environment has something for them (claimcheck.adapters.azure._transport)."""

from __future__ import annotations

import pytest
from azure.core.pipeline.transport import RequestsTransport
from claimcheck.adapters import azure


@pytest.fixture
def no_transport_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*azure.PROXY_VARIABLES, *azure.CA_BUNDLE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _session_of(options: dict[str, object]) -> RequestsTransport:
    transport = options["transport"]
    assert isinstance(transport, RequestsTransport)
    transport.open()
    return transport


def test_without_proxy_variables_the_session_skips_the_environment(
    no_transport_variables: pytest.MonkeyPatch,
) -> None:
    transport = _session_of(azure._transport())
    assert transport.session is not None
    assert transport.session.trust_env is False
    assert transport.connection_config.verify is True


def test_a_ca_bundle_variable_is_read_once_and_kept(no_transport_variables: pytest.MonkeyPatch) -> None:
    no_transport_variables.setenv("CURL_CA_BUNDLE", "/etc/curl-bundle.pem")
    no_transport_variables.setenv("REQUESTS_CA_BUNDLE", "/etc/requests-bundle.pem")
    transport = _session_of(azure._transport())
    assert transport.connection_config.verify == "/etc/requests-bundle.pem"  # requests' precedence


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "no_proxy"])
def test_a_proxy_variable_keeps_the_per_request_lookup(
    no_transport_variables: pytest.MonkeyPatch, variable: str
) -> None:
    no_transport_variables.setenv(variable, "http://proxy.example:3128")
    assert azure._transport() == {}
