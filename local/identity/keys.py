"""The local issuer's RSA signing key and token minting (PyJWT + cryptography).

Tokens are shaped like Entra ID v2.0 access tokens for an application (client-credentials) caller:
``iss`` ``<issuer base>/<tid>/v2.0``, ``aud`` the API's application ID URI, ``roles``, ``oid``,
``azp``, ``tid``, ``iat``/``nbf``/``exp``, RS256 with a ``kid`` in the header.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from local.identity.identities import LOCAL_AUDIENCE, LOCAL_DIRECTORY_TENANT, LocalIdentity

DEFAULT_LIFETIME_SECONDS = 3600


def issuer_url(base_url: str, tenant: str = LOCAL_DIRECTORY_TENANT) -> str:
    """``http://127.0.0.1:<port>`` → the issuer value its tokens carry (Entra's v2.0 form)."""
    return f"{base_url.rstrip('/')}/{tenant}/v2.0"


def jwks_url(base_url: str, tenant: str = LOCAL_DIRECTORY_TENANT) -> str:
    return f"{base_url.rstrip('/')}/{tenant}/discovery/v2.0/keys"


@dataclass(frozen=True)
class SigningKey:
    private_key: rsa.RSAPrivateKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def load(cls, path: Path) -> SigningKey:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{path} does not hold an RSA private key")
        return cls(key)

    def save(self, path: Path) -> None:
        """Write the private key readable by its owner only (it signs every local token)."""
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path.touch(mode=0o600)
        path.write_bytes(pem)

    @property
    def kid(self) -> str:
        """RFC 7638-style thumbprint of the public key: stable for one key, different for another."""
        numbers = self.private_key.public_key().public_numbers()
        canonical = f'{{"e":"{_b64(numbers.e)}","kty":"RSA","n":"{_b64(numbers.n)}"}}'
        return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode().rstrip("=")

    def public_jwk(self) -> dict[str, str]:
        numbers = self.private_key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": _b64(numbers.n),
            "e": _b64(numbers.e),
        }

    def public_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass(frozen=True)
class TokenMinter:
    """Signs access tokens for local identities; every claim can be overridden to forge a bad one."""

    key: SigningKey
    base_url: str
    audience: str = LOCAL_AUDIENCE
    directory_tenant: str = LOCAL_DIRECTORY_TENANT

    @property
    def issuer(self) -> str:
        return issuer_url(self.base_url, self.directory_tenant)

    def claims(
        self,
        identity: LocalIdentity,
        *,
        roles: Iterable[str] | None = None,
        lifetime: int = DEFAULT_LIFETIME_SECONDS,
        now: float | None = None,
    ) -> dict[str, Any]:
        issued = int(time.time() if now is None else now)
        return {
            "aud": self.audience,
            "iss": self.issuer,
            "iat": issued,
            "nbf": issued,
            "exp": issued + lifetime,
            "tid": self.directory_tenant,
            "oid": identity.object_id,
            "sub": identity.object_id,
            "azp": identity.app_id,
            "azpacr": "1",
            "roles": [str(role) for role in (identity.roles if roles is None else roles)],
            "ver": "2.0",
            "uti": uuid.uuid4().hex,
        }

    def sign(self, claims: dict[str, Any], *, kid: str | None = None) -> str:
        return jwt.encode(
            claims, self.key.private_key, algorithm="RS256", headers={"kid": kid or self.key.kid}
        )

    def token(
        self,
        identity: LocalIdentity,
        *,
        roles: Iterable[str] | None = None,
        lifetime: int = DEFAULT_LIFETIME_SECONDS,
    ) -> str:
        return self.sign(self.claims(identity, roles=roles, lifetime=lifetime))


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
