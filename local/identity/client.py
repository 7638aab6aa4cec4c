"""Get a token from the local issuer over HTTP, as a client gets one from Entra ID (client credentials).

The ops CLI and the launcher test use this; tests and the demo, which hold the stack, mint directly.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

_TIMEOUT_SECONDS = 30.0


def local_token(issuer: str, client_id: str, audience: str) -> str:
    """An access token for ``client_id`` (a local identity's name) and ``audience``, from ``issuer``
    (``http://127.0.0.1:<port>/<tid>/v2.0``), found through its OpenID configuration."""
    configuration = _get_json(f"{issuer.rstrip('/')}/.well-known/openid-configuration")
    form = urllib.parse.urlencode(
        {"grant_type": "client_credentials", "client_id": client_id, "scope": f"{audience}/.default"}
    ).encode()
    request = urllib.request.Request(str(configuration["token_endpoint"]), data=form, method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310 - loopback issuer
        answer = json.loads(response.read())
    return str(answer["access_token"])


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310 - loopback issuer
        document = json.loads(response.read())
    if not isinstance(document, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return document
