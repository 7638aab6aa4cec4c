"""Optional customer-managed keys (claimcheck:customerManagedKeyUri + claimcheck:customerManagedKeyIdentity).

With both set, the payload storage account (and the Service Bus namespace when it is Premium, the only
tier that takes a customer-managed key) encrypts with a key of your Key Vault instead of Microsoft's,
reaching the vault as the user-assigned identity you name (it needs the "Key Vault Crypto Service
Encryption User" role on the key, and the vault soft delete and purge protection, which Azure requires
for both services). Pure: no Pulumi import, so the stack config reads it offline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

URI_KEY, IDENTITY_KEY = "customerManagedKeyUri", "customerManagedKeyIdentity"
# https://<vault>.vault.azure.net/keys/<name>[/<version>]: without a version, both services follow the
# key's current version (automatic rotation).
_KEY_URI = re.compile(
    r"^(https://[a-z0-9](?:[a-z0-9-]{1,22}[a-z0-9])\.vault\.azure\.net)/keys/([A-Za-z0-9-]{1,127})"
    r"(?:/([0-9a-f]{32}))?/?$"
)
_IDENTITY_ID = re.compile(
    r"^/subscriptions/[0-9a-f-]{36}/resourceGroups/[-\w.()]{1,90}/providers/"
    r"Microsoft\.ManagedIdentity/userAssignedIdentities/[-\w]{3,128}$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CustomerManagedKey:
    key_vault_uri: str  # https://<vault>.vault.azure.net
    key_name: str
    key_version: str | None  # None: the key's current version, rotated automatically
    identity_id: str  # resource id of the user-assigned identity that reads the key


def customer_managed_key(uri: object, identity: object, prefix: str) -> CustomerManagedKey | None:
    """Both settings or neither; a half-set or malformed pair is a ValueError naming the key."""
    if uri is None and identity is None:
        return None
    if uri is None or identity is None:
        given, missing = (URI_KEY, IDENTITY_KEY) if identity is None else (IDENTITY_KEY, URI_KEY)
        raise ValueError(
            f"{prefix}:{missing} is missing: {prefix}:{given} alone cannot encrypt (a customer-managed key "
            "needs the key URI and the user-assigned identity that reads it)"
        )
    match = _KEY_URI.fullmatch(uri) if isinstance(uri, str) else None
    if match is None:
        raise ValueError(
            f"{prefix}:{URI_KEY}: {uri!r} is invalid; expected "
            "https://<vault>.vault.azure.net/keys/<name>[/<32-hex version>]"
        )
    if not isinstance(identity, str) or not _IDENTITY_ID.fullmatch(identity):
        raise ValueError(
            f"{prefix}:{IDENTITY_KEY}: {identity!r} is invalid; expected the resource id of a user-assigned "
            "identity (/subscriptions/<id>/resourceGroups/<rg>/providers/"
            "Microsoft.ManagedIdentity/userAssignedIdentities/<name>)"
        )
    vault, name, version = match.groups()
    return CustomerManagedKey(vault, name, version, identity)
