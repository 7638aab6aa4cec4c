"""Shared Access Signatures are checked over the resource exactly as the client encoded it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from urllib.parse import quote

from servicebus_emulator import DEFAULT_KEY
from servicebus_emulator.cbs import check_token


def _token(encoded_resource: str) -> str:
    expiry = str(int(time.time()) + 300)
    digest = hmac.new(DEFAULT_KEY.key.encode(), f"{encoded_resource}\n{expiry}".encode(), hashlib.sha256)
    signature = quote(base64.b64encode(digest.digest()).decode(), safe="")
    return f"SharedAccessSignature sig={signature}&se={expiry}&skn={DEFAULT_KEY.name}&sr={encoded_resource}"


def test_lower_case_escapes_as_the_javascript_administration_client_writes_them() -> None:
    """@azure/service-bus signs encodeURIComponent(url).toLowerCase(): %3a, not %3A."""
    resource = "https%3a%2f%2flocalhost%3a5300%2fqueue%3fapi-version%3d2021-05"
    assert check_token(_token(resource), DEFAULT_KEY)[0] == 202


def test_a_resource_changed_after_signing_is_refused() -> None:
    token = _token("https%3A%2F%2Flocalhost%2Fa").replace("%2Fa", "%2Fb")
    assert check_token(token, DEFAULT_KEY) == (401, "Unauthorized: the signature does not match the key.")
