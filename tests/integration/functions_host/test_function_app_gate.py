"""The Function App's token gate fails closed: no identity settings, or no reachable signing keys,
means 503 on every HTTP route, never an unchecked call (function_app.py's handlers, called directly)."""

from __future__ import annotations

import json

import azure.functions as func
import pytest
from claimcheck.settings import AUDIENCE_SETTING, ISSUER_SETTING, JWKS_URI_SETTING

from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import HttpFunction, load_function_app
from local.identity import SigningKey, TokenMinter, identity_named
from local.ports import free_port


def _call_every_route(authorization: str) -> list[func.HttpResponse]:
    answers = []
    for function in load_function_app(DEFAULT_APP).of_type(HttpFunction):
        request = func.HttpRequest(
            method=sorted(function.methods or {"GET"})[0],
            url=f"http://127.0.0.1/api/{function.route}",
            headers={"Authorization": authorization},
            route_params={"id": "wi-1"},
            params={},
            body=b"document",
        )
        answers.append(function.handler(request))
    return answers


def test_without_its_token_settings_every_route_answers_503(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ISSUER_SETTING, AUDIENCE_SETTING, JWKS_URI_SETTING):
        monkeypatch.delenv(name, raising=False)
    answers = _call_every_route("Bearer a.b.c")
    assert answers
    for response in answers:
        assert response.status_code == 503
        assert json.loads(response.get_body())["error"] == "unavailable"


def test_unreachable_signing_keys_answer_503_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    base = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    minter = TokenMinter(SigningKey.generate(), base_url=base)
    monkeypatch.setenv(ISSUER_SETTING, minter.issuer)
    monkeypatch.setenv(AUDIENCE_SETTING, minter.audience)
    monkeypatch.setenv(JWKS_URI_SETTING, f"{base}/keys")
    token = minter.token(identity_named("local-producer"))
    for response in _call_every_route(f"Bearer {token}"):
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "5"
