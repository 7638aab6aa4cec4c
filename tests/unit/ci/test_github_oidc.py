"""Entra tokens from fresh GitHub OIDC assertions (scripts/ci/github_oidc.py, used by claimcheck-ops
deploy and smoke), against local stand-ins for the runner's ID-token endpoint and Entra's
client-assertion exchange (identity_stand_ins.py), which refuse a stale assertion as Entra does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import ClientAssertionCredential

from scripts import ops_token
from scripts.ci.github_oidc import OidcError, github_oidc_credential, request_id_token
from scripts.ops_errors import OpsError
from tests.unit.ci.identity_stand_ins import Entra, Runner, stand_ins

ARM = "https://management.azure.com/.default"
API = "api://claimcheck-dev/.default"


@pytest.fixture
def endpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Runner, Entra]]:
    """The stand-ins, and the job's environment as the runner and deploy-stack.yml set it."""
    with stand_ins(tmp_path) as (runner, entra, ca_file):
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca_file))  # trust the stand-in's certificate
        monkeypatch.setenv("AZURE_AUTHORITY_HOST", entra.authority)
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", runner.url)
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", runner.request_token)
        monkeypatch.setenv("ARM_CLIENT_ID", entra.client_id)
        monkeypatch.setenv("ARM_TENANT_ID", entra.tenant)
        ops_token.entra_credential.cache_clear()
        yield runner, entra
        ops_token.entra_credential.cache_clear()


def test_the_id_token_request_is_the_toolkits(endpoints: tuple[Runner, Entra]) -> None:
    """GET the request URL with &audience=api://AzureADTokenExchange and the bearer; without the
    runner's request token the endpoint refuses, and the error holds neither token."""
    runner, _ = endpoints
    assert request_id_token(runner.url, runner.request_token).count(".") == 2
    with pytest.raises(OidcError, match=r"answered 401.*id-token: write") as refused:
        request_id_token(runner.url, "not-the-request-token")
    assert runner.request_token not in str(refused.value)


def test_a_token_requested_after_the_first_assertion_expired_gets_a_fresh_one(
    endpoints: tuple[Runner, Entra],
) -> None:
    """The ARM token at the start, then (after the runner's assertion lifetime, as after a long
    `pulumi up` and a remote build) the API token: a new assertion is requested and accepted."""
    runner, entra = endpoints
    credential = github_oidc_credential(__import__("os").environ)
    assert credential is not None
    with credential:
        assert credential.get_token(ARM).token
        runner.clock.advance(runner.lifetime + 600)
        assert credential.get_token(API).token
    assert entra.exchanges == [ARM, API]
    assert entra.refusals == []
    assert runner.issued == 2


def test_a_one_time_assertion_is_refused_once_expired(endpoints: tuple[Runner, Entra]) -> None:
    """What azure/login leaves the Azure CLI: one assertion, exchanged again later. The stand-in
    refuses it as Entra does (AADSTS700024), so the test above proves something."""
    runner, entra = endpoints
    once = runner.mint("api://AzureADTokenExchange")
    with ClientAssertionCredential(entra.tenant, entra.client_id, lambda: once) as credential:
        assert credential.get_token(ARM).token
        runner.clock.advance(runner.lifetime + 1)
        with pytest.raises(ClientAuthenticationError, match="AADSTS700024"):
            credential.get_token(API)
    assert entra.refusals == ["700024"]


def test_an_assertion_for_another_subject_or_audience_is_refused(endpoints: tuple[Runner, Entra]) -> None:
    """The federated credential's subject (repo:<owner>/<repo>:environment:<stack>) and audience
    must match: a pull request's token cannot sign in as the deploy identity."""
    runner, entra = endpoints
    runner.subject = "repo:my-org/claim-check:pull_request"
    with pytest.raises(OpsError, match="AADSTS700213"):
        ops_token.entra_token(ARM)
    wrong_audience = runner.mint("api://something-else")
    with (
        ClientAssertionCredential(entra.tenant, entra.client_id, lambda: wrong_audience) as credential,
        pytest.raises(ClientAuthenticationError, match="AADSTS700212"),
    ):
        credential.get_token(ARM)


def test_the_ops_commands_tokens_come_from_the_runner(endpoints: tuple[Runner, Entra]) -> None:
    """claimcheck-ops deploy's ARM token (ops_release.azure_token) and smoke's API token
    (TokenSource on a non-loopback API) both go through the runner's endpoint, not the CLI's login."""
    from scripts.ops_release import azure_token

    runner, entra = endpoints
    assert azure_token(ARM)
    tokens = ops_token.TokenSource(audience="api://claimcheck-dev")
    assert tokens.token("https://app-1.azurewebsites.net/api")
    assert entra.exchanges == [ARM, API]
    assert runner.issued == 2


def test_outside_such_a_job_there_is_no_federated_credential() -> None:
    """No runner variables: None (DefaultAzureCredential then); the variables without the identity's
    ids: a refusal naming them."""
    assert github_oidc_credential({}) is None
    partial = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}
    with pytest.raises(OidcError, match="ARM_CLIENT_ID/ARM_TENANT_ID"):
        github_oidc_credential(partial)
