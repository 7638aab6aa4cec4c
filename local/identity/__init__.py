"""The local stand-in for Entra ID: a token issuer on loopback with its own RSA signing key.

``keys`` holds the key and the token minting (what the demo, the tests and the ops CLI use),
``identities`` the local callers and their access-table grants, ``server`` the HTTP side
(OpenID configuration, JWKS and a client-credentials token endpoint). ``python -m local.identity``
runs the server; local/stack.py starts it next to Azurite, the emulator and the Functions host.
"""

from local.identity.identities import (
    LOCAL_ARCHIVE_ROLE,
    LOCAL_AUDIENCE,
    LOCAL_DIRECTORY_TENANT,
    LOCAL_IDENTITIES,
    LOCAL_REVIEWERS_GROUP,
    LocalIdentity,
    identity_named,
    local_access_table,
    local_consumer_settings,
)
from local.identity.keys import SigningKey, TokenMinter, issuer_url

__all__ = [
    "LOCAL_ARCHIVE_ROLE",
    "LOCAL_AUDIENCE",
    "LOCAL_DIRECTORY_TENANT",
    "LOCAL_IDENTITIES",
    "LOCAL_REVIEWERS_GROUP",
    "LocalIdentity",
    "SigningKey",
    "TokenMinter",
    "identity_named",
    "issuer_url",
    "local_access_table",
    "local_consumer_settings",
]
