"""Caller identity: validate an Entra ID (or local issuer) bearer token and check the route's app role.

Pure: the signing keys come through ``SigningKeys`` (claimcheck.adapters.jwks fetches them over HTTP),
and PyJWT does the cryptography. Nothing here trusts what a caller says about itself: the identity,
its directory and its app roles come only from a token whose signature, issuer, audience and lifetime
check out.

A refusal is ``Unauthenticated`` (HTTP 401) or ``MissingRole`` (HTTP 403). The exception text says
which check failed, for the log line; the HTTP answer never does (see ``UNAUTHENTICATED_BODY``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import jwt

from claimcheck.callers import AppRole, Caller
from claimcheck.settings import (
    AUDIENCE_SETTING,
    ISSUER_SETTING,
    JWKS_URI_SETTING,
    LEEWAY_SETTING,
    SettingsError,
)

__all__ = ["AppRole", "Caller"]  # re-exported: they belong to the caller model, used here and in access


# Entra ID signs access tokens with RS256; any other algorithm (none, HS256 keyed with the public key)
# is refused before a key is even looked up.
ALLOWED_ALGORITHMS = ("RS256",)
DEFAULT_LEEWAY_SECONDS = 60
_MAX_TOKEN_CHARS = 16 * 1024

# What a 401 says, whatever failed: a caller learns nothing about which check it did not pass.
WWW_AUTHENTICATE = 'Bearer error="invalid_token"'
UNAUTHENTICATED_BODY = {
    "error": "unauthenticated",
    "message": "a valid bearer token for this API is required",
}
MISSING_ROLE_BODY = {"error": "forbidden", "message": "the caller lacks the app role this route requires"}


class Unauthenticated(Exception):
    """No usable token (401). The text names the failed check for the log, never for the caller."""


class MissingRole(Exception):
    """A valid token without the app role the route requires (403)."""


class KeysUnavailable(Exception):
    """The issuer's signing keys could not be fetched (503: the caller may retry)."""


class SigningKeys(Protocol):
    def key_for(self, kid: str) -> Any | None:
        """The verification key with this ``kid`` (a PyJWK's ``.key``), or None when the issuer has none."""


@dataclass(frozen=True)
class TokenRules:
    """What a token must say to be accepted: its issuer, one of the audiences, and a lifetime."""

    issuer: str
    audiences: tuple[str, ...]
    jwks_uri: str
    leeway_seconds: int = DEFAULT_LEEWAY_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TokenRules:
        values = {
            name: env.get(name, "").strip() for name in (ISSUER_SETTING, AUDIENCE_SETTING, JWKS_URI_SETTING)
        }
        for name, value in values.items():
            if not value:
                raise SettingsError(f"app setting {name} is not set: every HTTP route needs a bearer token")
        audiences = tuple(part.strip() for part in values[AUDIENCE_SETTING].split(",") if part.strip())
        raw_leeway = env.get(LEEWAY_SETTING, str(DEFAULT_LEEWAY_SECONDS))
        if not raw_leeway.isdigit() or int(raw_leeway) > 300:
            raise SettingsError(f"{LEEWAY_SETTING} must be 0-300 seconds, got {raw_leeway!r}")
        return cls(values[ISSUER_SETTING], audiences, values[JWKS_URI_SETTING], int(raw_leeway))


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header; ``Unauthenticated`` otherwise."""
    if not authorization:
        raise Unauthenticated("no Authorization header")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("Authorization is not a Bearer token")
    if len(token) > _MAX_TOKEN_CHARS:
        raise Unauthenticated("token too long")
    return token


def authenticate(authorization: str | None, rules: TokenRules, keys: SigningKeys) -> Caller:
    """Validate the bearer token of ``authorization`` and return the caller it proves."""
    token = bearer_token(authorization)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise Unauthenticated("malformed token") from None
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in ALLOWED_ALGORITHMS:
        raise Unauthenticated("token algorithm not allowed")
    if not isinstance(kid, str) or not kid:
        raise Unauthenticated("token names no signing key")
    key = keys.key_for(kid)
    if key is None:
        raise Unauthenticated("token signed with a key the issuer does not publish")
    try:
        claims = jwt.decode(
            token,
            key=key,
            algorithms=list(ALLOWED_ALGORITHMS),
            audience=list(rules.audiences),
            issuer=rules.issuer,
            leeway=rules.leeway_seconds,
            options={"require": ["exp", "nbf", "iat", "iss", "aud"], "verify_signature": True},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthenticated("token expired") from None
    except jwt.ImmatureSignatureError:
        raise Unauthenticated("token not valid yet") from None
    except jwt.InvalidAudienceError:
        raise Unauthenticated("token audience is not this API") from None
    except jwt.InvalidIssuerError:
        raise Unauthenticated("token issuer is not trusted") from None
    except jwt.InvalidSignatureError:
        raise Unauthenticated("token signature does not verify") from None
    except jwt.PyJWTError as error:
        raise Unauthenticated(f"token rejected ({type(error).__name__})") from None
    return _caller(claims)


def _caller(claims: Mapping[str, Any]) -> Caller:
    roles, groups = claims.get("roles", []), claims.get("groups", [])
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise Unauthenticated("token roles claim is malformed")
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise Unauthenticated("token groups claim is malformed")
    object_id = claims.get("oid", "")
    # v2.0 tokens name the client application in azp, v1.0 tokens in appid.
    app_id = claims.get("azp") or claims.get("appid") or ""
    tenant = claims.get("tid", "")
    if not all(isinstance(value, str) for value in (object_id, app_id, tenant)) or not (object_id or app_id):
        raise Unauthenticated("token names no caller")
    return Caller(
        object_id=object_id,
        app_id=app_id,
        directory_tenant=tenant,
        roles=frozenset(roles),
        groups=frozenset(groups),
        # Entra: a delegated (user) token carries the scopes granted to the app in `scp`; an app-only
        # token has none (`idtyp`, an optional claim, says "app" or "user" outright).
        delegated="scp" in claims or claims.get("idtyp") == "user",
    )


def require_role(caller: Caller, accepted: Collection[AppRole]) -> None:
    """``MissingRole`` unless the caller holds one of the ``accepted`` app roles."""
    if not caller.roles.intersection(role.value for role in accepted):
        raise MissingRole(f"caller holds none of {sorted(role.value for role in accepted)}")
