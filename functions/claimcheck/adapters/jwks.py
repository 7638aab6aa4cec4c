"""Fetch an issuer's JWKS document over HTTP(S) (stdlib only): the I/O behind CachedSigningKeys."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from claimcheck.settings import JWKS_URI_SETTING, SettingsError

_TIMEOUT_SECONDS = 10.0
_MAX_BYTES = 1024 * 1024


def jwks_fetcher(uri: str) -> Callable[[], Mapping[str, Any]]:
    """A fetch function for ``uri``: HTTPS, or plain HTTP to a loopback address (the local issuer)."""
    parsed = urllib.parse.urlsplit(uri)
    loopback = parsed.hostname in ("127.0.0.1", "localhost", "::1")
    if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
        raise SettingsError(f"{JWKS_URI_SETTING} must be https (or http on loopback for the local issuer)")

    def fetch() -> Mapping[str, Any]:
        request = urllib.request.Request(uri, headers={"Accept": "application/json"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310
            document = json.loads(response.read(_MAX_BYTES))
        if not isinstance(document, dict):
            raise ValueError("JWKS document is not a JSON object")
        return document

    return fetch
