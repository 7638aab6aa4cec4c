"""The local issuer's HTTP side, on loopback: what a client and the API read from Entra ID.

- ``GET /<tid>/v2.0/.well-known/openid-configuration``: issuer, jwks_uri, token_endpoint;
- ``GET /<tid>/discovery/v2.0/keys``: the JWKS (public key only);
- ``POST /<tid>/oauth2/v2.0/token``: client credentials (``client_id`` = a local identity's name,
  ``scope`` = ``<application ID URI>/.default``), answering a signed access token. There is no client
  secret: the issuer listens on loopback only and stands in for Entra on a developer's machine.

Request lines are logged without query strings or bodies, so no token ever reaches the log.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from local.identity.identities import identity_named
from local.identity.keys import DEFAULT_LIFETIME_SECONDS, TokenMinter, jwks_url

log = logging.getLogger("local.identity")
_MAX_FORM_BYTES = 16 * 1024


def make_server(minter: TokenMinter, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    tenant = minter.directory_tenant
    paths = {
        "openid": f"/{tenant}/v2.0/.well-known/openid-configuration",
        "keys": f"/{tenant}/discovery/v2.0/keys",
        "token": f"/{tenant}/oauth2/v2.0/token",
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if path == paths["openid"]:
                self._json(
                    200,
                    {
                        "issuer": minter.issuer,
                        "jwks_uri": jwks_url(minter.base_url, tenant),
                        "token_endpoint": minter.base_url + paths["token"],
                        "token_endpoint_auth_methods_supported": ["none"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "response_types_supported": ["token"],
                        "subject_types_supported": ["pairwise"],
                    },
                )
            elif path == paths["keys"]:
                self._json(200, {"keys": [minter.key.public_jwk()]})
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if urllib.parse.urlsplit(self.path).path != paths["token"]:
                self._json(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_FORM_BYTES:
                self._json(400, {"error": "invalid_request", "error_description": "form too large"})
                return
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8", "replace")))
            self._json(*_token_answer(minter, form))

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.command, urllib.parse.urlsplit(self.path).path)

    return ThreadingHTTPServer((host, port), Handler)


def _token_answer(minter: TokenMinter, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    if form.get("grant_type") != "client_credentials":
        return 400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"}
    if form.get("scope") != f"{minter.audience}/.default":
        return 400, {
            "error": "invalid_scope",
            "error_description": f"scope must be {minter.audience}/.default",
        }
    try:
        identity = identity_named(form.get("client_id", ""))
    except KeyError:
        return 401, {"error": "invalid_client", "error_description": "unknown client_id"}
    token = minter.token(identity)
    return 200, {"token_type": "Bearer", "expires_in": DEFAULT_LIFETIME_SECONDS, "access_token": token}
