"""Local stand-ins for the GitHub runner's ID-token endpoint and Entra ID's client-assertion exchange,
as strict as the real ones where the credential depends on them.

- The runner's endpoint (actions/toolkit `getIDToken`): GET with `Authorization: Bearer <request
  token>` (401 without the right one) and an `audience` query parameter; answers `{"value": <JWT>}`,
  signed RS256, `iss` https://token.actions.githubusercontent.com, `aud` the audience, `sub` the job's
  subject, valid for `lifetime` seconds (GitHub's are minutes). It is plain HTTP on loopback; the real
  one is HTTPS.
- Entra's token endpoint (`POST https://<authority>/<tenant>/oauth2/v2.0/token`, HTTPS: azure-identity
  refuses an http authority): client credentials with `client_assertion_type` jwt-bearer; the
  assertion's signature (the issuer's key), issuer, audience and subject must match the app's
  federated credential, and its nbf/exp must hold at the stand-in's clock, or the answer is 400
  invalid_client with the AADSTS code Entra uses: 700024 (assertion not within its valid time range),
  700211/700212/700213 (no federated record for the issuer / audience / subject), 50013 (signature).

Both stand-ins read one `Clock`, which a test moves: no sleeping.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt

from local.azurite_tls import write_self_signed_certificate
from local.identity.keys import SigningKey
from scripts.ci.github_oidc import AUDIENCE

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@dataclass
class Clock:
    now: float = field(default_factory=time.time)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Runner:
    """The runner's ID-token endpoint."""

    clock: Clock
    request_token: str = field(default_factory=lambda: uuid.uuid4().hex)
    subject: str = "repo:my-org/claim-check:environment:dev"
    lifetime: int = 300
    key: SigningKey = field(default_factory=SigningKey.generate)
    issued: int = 0
    url: str = ""

    def mint(self, audience: str) -> str:
        self.issued += 1
        now = int(self.clock.now)
        claims = {"iss": GITHUB_ISSUER, "aud": audience, "sub": self.subject, "iat": now, "nbf": now}
        claims |= {"exp": now + self.lifetime, "jti": uuid.uuid4().hex}
        return jwt.encode(claims, self.key.private_key, algorithm="RS256", headers={"kid": self.key.kid})


@dataclass
class Entra:
    """Entra's token endpoint for app registrations federated to one subject: `client_id` (the deploy
    identity) and `other_client_ids` (e.g. the smoke app); any other client id is unknown (700016)."""

    clock: Clock
    trusted: Runner
    tenant: str = "9c0ffee0-0000-4000-8000-0000000000e1"
    client_id: str = "c11e0000-0000-4000-8000-0000000000c1"
    subject: str = "repo:my-org/claim-check:environment:dev"
    other_client_ids: tuple[str, ...] = ()
    exchanges: list[str] = field(default_factory=list)  # the scope of each token issued
    tokens: dict[str, str] = field(default_factory=dict)  # access token issued -> its scope
    clients: dict[str, str] = field(default_factory=dict)  # access token issued -> its client id
    refusals: list[str] = field(default_factory=list)  # the AADSTS code of each refusal
    authority: str = ""

    def exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != JWT_BEARER:
            return self._refuse("900144", "The request body must contain client_assertion_type jwt-bearer.")
        client_id = form.get("client_id", "")
        if client_id not in (self.client_id, *self.other_client_ids):
            return self._refuse("700016", "Application not found in the directory.")
        scope = form.get("scope", "")
        if len(scope.split()) != 1 or not scope.endswith("/.default"):
            return self._refuse("1002012", "The provided value for scope is not valid.")
        try:
            claims = jwt.decode(
                form.get("client_assertion", ""),
                self.trusted.key.private_key.public_key(),
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_nbf": False, "verify_iat": False, "verify_aud": False},
            )
        except jwt.PyJWTError:
            return self._refuse("50013", "Assertion failed signature validation.")
        if claims.get("iss") != GITHUB_ISSUER:
            return self._refuse(
                "700211", "No matching federated identity record found for presented assertion issuer."
            )
        if claims.get("aud") != AUDIENCE:
            return self._refuse(
                "700212", "No matching federated identity record found for presented assertion audience."
            )
        if claims.get("sub") != self.subject:
            return self._refuse(
                "700213", "No matching federated identity record found for presented assertion subject."
            )
        now = self.clock.now
        if not float(claims.get("nbf", 0)) <= now < float(claims.get("exp", 0)):
            return self._refuse("700024", "Client assertion is not within its valid time range.")
        self.exchanges.append(scope)
        issued = int(now)
        token = jwt.encode(
            {"aud": scope.removesuffix("/.default"), "iss": f"https://sts.windows.net/{self.tenant}/",
             "appid": client_id, "iat": issued, "nbf": issued, "exp": issued + 3600},
            self.trusted.key.private_key,
            algorithm="RS256",
        )  # fmt: skip
        self.tokens[token] = scope
        self.clients[token] = client_id
        return 200, {
            "token_type": "Bearer",
            "expires_in": 3599,
            "ext_expires_in": 3599,
            "access_token": token,
        }

    def _refuse(self, code: str, text: str) -> tuple[int, dict[str, Any]]:
        self.refusals.append(code)
        return 400, {
            "error": "invalid_client",
            "error_description": f"AADSTS{code}: {text}",
            "error_codes": [int(code)],
        }


def _handler(runner: Runner, entra: Entra) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            if parts.path != "/id-token" or query.get("api-version") != "2.0":
                self._answer(404, {"message": "Not Found"})
            elif self.headers.get("Authorization") != f"Bearer {runner.request_token}":
                self._answer(401, {"message": "Unauthorized"})
            elif not query.get("audience"):
                self._answer(400, {"message": "audience is required"})
            else:
                self._answer(200, {"count": 1, "value": runner.mint(query["audience"])})

        def do_POST(self) -> None:
            if self.path != f"/{entra.tenant}/oauth2/v2.0/token":
                self._answer(404, {"error": "not_found"})
                return
            if self.headers.get("Content-Type", "").split(";")[0] != "application/x-www-form-urlencoded":
                self._answer(400, {"error": "invalid_request"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            self._answer(*entra.exchange(form))

    return Handler


@contextmanager
def _serve(server: ThreadingHTTPServer) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def stand_ins(folder: Path) -> Iterator[tuple[Runner, Entra, Path]]:
    """The runner's endpoint (http) and Entra (https, self-signed: the CA file is the third value)."""
    clock = Clock()
    runner = Runner(clock)
    entra = Entra(clock, runner)
    tls = write_self_signed_certificate(folder)  # the local stack's own loopback certificate
    cert, key = tls.certificate, tls.private_key
    plain = ThreadingHTTPServer(("127.0.0.1", 0), _handler(runner, entra))
    secure = ThreadingHTTPServer(("127.0.0.1", 0), _handler(runner, entra))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    runner.url = f"http://127.0.0.1:{plain.server_address[1]}/id-token?api-version=2.0"
    entra.authority = f"https://127.0.0.1:{secure.server_address[1]}"
    with _serve(plain), _serve(secure):
        yield runner, entra, cert
