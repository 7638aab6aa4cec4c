"""Claims-based security ($cbs put-token): check a Shared Access Signature like the service does.

A client signs ``encoded(audience) + "\\n" + expiry`` with HMAC-SHA256 and the key, and sends
``SharedAccessSignature sr=<encoded(audience)>&sig=..&se=..&skn=..`` (Python's SDK encodes with
``quote_plus``, the JavaScript administration client with lower-case escapes). A wrong key name, a
wrong signature or an expired token is refused with 401; nothing about the token is logged or echoed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from urllib.parse import unquote

from servicebus_emulator.message import AmqpMessage
from servicebus_emulator.model import BrokerError


@dataclass(frozen=True)
class SharedAccessKey:
    name: str
    key: str


def check_put_token(request: AmqpMessage, token: object, key: SharedAccessKey | None) -> tuple[int, str]:
    """Status code and description for a put-token request whose body value is ``token``."""
    operation = request.application_properties.get("operation")
    if operation != "put-token":
        return 400, f"Unsupported $cbs operation {operation!r}."
    return check_token(token, key)


def check_token(token: object, key: SharedAccessKey | None) -> tuple[int, str]:
    """202 for a valid Shared Access Signature signed with ``key`` (any audience), else 401 and why.
    Used by $cbs put-token and by the HTTP management plane's Authorization header."""
    if key is None:
        return 202, "Accepted (the emulator runs without a key)."
    if not isinstance(token, str) or not token.startswith("SharedAccessSignature "):
        return 401, "Unauthorized: only a Shared Access Signature can be validated by the emulator."
    # The signature covers the resource exactly as the client encoded it in ``sr`` (Python's SDK
    # with upper-case escapes, the JavaScript administration client lower-case), so the raw field
    # is what is signed again here; the other fields are read decoded.
    raw = dict(part.partition("=")[::2] for part in token[len("SharedAccessSignature ") :].split("&"))
    audience = raw.get("sr")
    signature, expiry, key_name = (
        unquote(raw[name]) if name in raw else None for name in ("sig", "se", "skn")
    )
    if not (audience and signature and expiry and key_name) or not expiry.isdigit():
        return 401, "Unauthorized: malformed Shared Access Signature."
    if key_name != key.name:
        return 401, f"Unauthorized: unknown SharedAccessKeyName {key_name!r}."
    if int(expiry) < time.time():
        return 401, "Unauthorized: the token has expired."
    expected = base64.b64encode(
        hmac.new(key.key.encode("utf-8"), f"{audience}\n{expiry}".encode(), hashlib.sha256).digest()
    ).decode("ascii")
    if not hmac.compare_digest(expected, signature):
        return 401, "Unauthorized: the signature does not match the key."
    return 202, "Accepted"


class Authorization:
    """One connection's claims: it may use entities once a valid token was put on ``$cbs`` (or
    when the emulator runs without a key)."""

    def __init__(self, key: SharedAccessKey | None) -> None:
        self.key = key
        self.authorized = key is None

    def put_token(self, request: AmqpMessage, token: object) -> tuple[int, str]:
        status, description = check_put_token(request, token, self.key)
        self.authorized = self.authorized or status < 300
        return status, description

    def require(self) -> None:
        if not self.authorized:
            raise BrokerError(
                "amqp:unauthorized-access", "Unauthorized access: put a valid token on $cbs first."
            )
