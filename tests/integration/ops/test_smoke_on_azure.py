"""`claimcheck-ops smoke` as the deploy job runs it on Azure: the function key read through ARM
listKeys (the OneDeploy/ARM stand-in of test_deploy_contract.py) and the API token from a fresh
GitHub OIDC assertion (the runner and Entra stand-ins of tests/unit/ci/), every request to the API
stand-in only: no Service Bus, no Azure CLI. The verdict logic against the real API is
tests/e2e/test_smoke.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scripts import ops_token
from scripts.ops import app
from tests.integration.ops.api_stub import running_api_stub
from tests.integration.ops.test_deploy_contract import APP_ID, FUNCTION_KEY, FakeAzure, _handler
from tests.unit.ci.identity_stand_ins import stand_ins

ARM_SCOPE = "https://management.azure.com/.default"
AUDIENCE = "api://claimcheck-dev"
ROUTING = {"document_type": "contract", "priority": "normal", "review_required": False}


@pytest.fixture
def arm() -> Iterator[FakeAzure]:
    fake = FakeAzure()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.scm_host = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield fake
    server.shutdown()
    server.server_close()


SMOKE_CLIENT_ID = "5a0e0000-0000-4000-8000-00000000005a"


@pytest.mark.parametrize("smoke_app", [False, True], ids=["job-identity", "smoke-app"])
def test_smoke_on_azure_uses_arm_for_the_key_and_a_fresh_assertion_for_the_api(
    arm: FakeAzure, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smoke_app: bool
) -> None:
    """With CLAIMCHECK_API_CLIENT_ID (the workflow's smoke step sets the smoke app's client id) the API
    token is the smoke app's, which holds the API roles; listKeys stays the deploy identity's."""
    with stand_ins(tmp_path) as (runner, entra, ca_file), running_api_stub() as api:
        entra.other_client_ids = (SMOKE_CLIENT_ID,)
        if smoke_app:
            monkeypatch.setenv("CLAIMCHECK_API_CLIENT_ID", SMOKE_CLIENT_ID)
        else:
            monkeypatch.delenv("CLAIMCHECK_API_CLIENT_ID", raising=False)
        arm.accepts = lambda token: entra.tokens.get(token) == ARM_SCOPE
        for name, value in {
            "REQUESTS_CA_BUNDLE": str(ca_file),
            "AZURE_AUTHORITY_HOST": entra.authority,
            "ACTIONS_ID_TOKEN_REQUEST_URL": runner.url,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": runner.request_token,
            "ARM_CLIENT_ID": entra.client_id,
            "ARM_TENANT_ID": entra.tenant,
        }.items():
            monkeypatch.setenv(name, value)
        # On Azure: no local issuer (this folder's conftest sets one), and the API stub on loopback
        # stands in for https://<app>.azurewebsites.net, which the command does not take for local.
        monkeypatch.delenv("CLAIMCHECK_TOKEN_ISSUER", raising=False)
        monkeypatch.setattr(ops_token, "_default_local_issuer", lambda api: None)
        ops_token.entra_credential.cache_clear()
        view = {"work_item_id": "wi-1", "state": "completed", "version": 1, "payload_state": "removed"}
        api.answers = {
            ("POST", "/api/documents"): (202, {"work_item_id": "wi-1", "receipt": {"version": 1}}),
            ("GET", "/api/work-items/wi-1"): (200, view),
            ("GET", "/api/work-items/wi-1/result?version=1"): (
                200,
                {"work_item_id": "wi-1", "version": 1, "summary": ROUTING, "result": {"parties": ["a"]}},
            ),
        }
        runner.clock.advance(3600)  # long after azure/login's assertion expired
        result = CliRunner().invoke(
            app,
            ["smoke", "--api", api.base_url, "--audience", AUDIENCE, "--app-id", APP_ID],
            env={"CLAIMCHECK_ARM_ENDPOINT": f"http://{arm.scm_host}"},
        )
        ops_token.entra_credential.cache_clear()
    assert result.exit_code == 0, result.output
    assert "smoke test passed" in result.stdout
    assert [seen.path for seen in arm.seen] == [f"{APP_ID}/host/default/listKeys?api-version=2024-04-01"]
    api_tokens = {token for token, scope in entra.tokens.items() if scope == f"{AUDIENCE}/.default"}
    assert len(api_tokens) == 1
    api_caller = SMOKE_CLIENT_ID if smoke_app else entra.client_id
    assert {entra.clients[token] for token in api_tokens} == {api_caller}
    arm_tokens = {token for token, scope in entra.tokens.items() if scope == ARM_SCOPE}
    assert {entra.clients[token] for token in arm_tokens} == {entra.client_id}
    for request in api.requests:
        assert request.headers["x-functions-key"] == FUNCTION_KEY
        assert request.headers["authorization"].removeprefix("Bearer ") in api_tokens
    assert runner.issued == 2  # one assertion per Entra token (ARM, then the API)
    assert FUNCTION_KEY not in result.output
