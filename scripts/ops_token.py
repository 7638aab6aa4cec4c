"""The bearer token `claimcheck-ops` sends to the API: from Entra ID on Azure, the local issuer locally.

On Azure: an Entra token for `<audience>/.default` from `entra_credential()`: in a GitHub Actions job that
may mint ID tokens, a fresh GitHub OIDC assertion for every new token (scripts/ci/github_oidc.py), else
DefaultAzureCredential (az login, a managed identity); the audience is the API's application ID URI
(`pulumi stack output apiAudience`). Locally: the client-credentials endpoint of the stack's token
issuer (local/identity/), as the client id `local-operator` unless told otherwise. The token is only
ever put in the Authorization header: never printed, never in an error line.
"""

from __future__ import annotations

import functools
import os
import urllib.error
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scripts.ci.github_oidc import API_CLIENT_ID, CLIENT_ID
from scripts.ops_errors import OpsError

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

LOCAL_CLIENT_ID = "local-operator"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class TokenSource:
    audience: str | None = None  # the API's application ID URI
    issuer: str | None = None  # the local issuer's URL; None on Azure
    client_id: str = LOCAL_CLIENT_ID

    def token(self, api: str) -> str:
        issuer = self.issuer or _default_local_issuer(api)
        if issuer is not None:
            return _local_token(issuer, self.client_id, self.audience)
        if not self.audience:
            raise OpsError(
                "no token source: give --audience (the API's application ID URI, "
                "`pulumi stack output apiAudience`) or, for the local stack, --token-issuer"
            )
        return _entra_token(self.audience)


def _default_local_issuer(api: str) -> str | None:
    """A loopback API is the local stack's, whose issuer listens on its default port.

    local.identity is imported only then: it needs the claimcheck package (functions/), which a CI
    job that installs only requirements-ops.txt to smoke-test Azure does not have on its path.
    """
    if urllib.parse.urlsplit(api).hostname not in _LOOPBACK:
        return None
    from local.identity import LOCAL_DIRECTORY_TENANT, issuer_url

    return issuer_url("http://127.0.0.1:7090", LOCAL_DIRECTORY_TENANT)


def _local_token(issuer: str, client_id: str, audience: str | None) -> str:
    from local.identity import LOCAL_AUDIENCE
    from local.identity.client import local_token

    try:
        return local_token(issuer, client_id, audience or LOCAL_AUDIENCE)
    except urllib.error.HTTPError as error:
        raise OpsError(
            f"the local token issuer at {issuer} refused client {client_id!r}: HTTP {error.code}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
        raise OpsError(
            f"cannot get a token from the local issuer at {issuer} ({type(error).__name__}); "
            "is `python -m local.stack` running? (--token-issuer / CLAIMCHECK_TOKEN_ISSUER)"
        ) from None


def _entra_token(audience: str) -> str:
    """A token for the deployed API: as CLAIMCHECK_API_CLIENT_ID's identity when the job names one
    (the smoke app), else as the job's own (scripts/ci/github_oidc.py)."""
    caller = API_CLIENT_ID if os.environ.get(API_CLIENT_ID) else CLIENT_ID
    return entra_token(f"{audience.rstrip('/')}/.default", caller)


@functools.cache
def entra_credential(client_id_variable: str = CLIENT_ID) -> TokenCredential:
    """One credential per process and identity, so its in-memory token cache serves every request of a
    command and a token near its end is renewed (with a new assertion in CI) instead of failing."""
    from scripts.ci.github_oidc import OidcError, github_oidc_credential

    try:
        federated = github_oidc_credential(os.environ, client_id_variable)
    except OidcError as error:
        raise OpsError(str(error)) from None
    if federated is not None:
        return federated
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def entra_token(scope: str, client_id_variable: str = CLIENT_ID) -> str:
    """A bearer token for `scope` (`<resource>/.default`); an OpsError in one line if Entra refuses."""
    from azure.core.exceptions import ClientAuthenticationError

    from scripts.ci.github_oidc import OidcError

    try:
        return entra_credential(client_id_variable).get_token(scope).token
    except (ClientAuthenticationError, OidcError) as error:
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        raise OpsError(
            f"not signed in to Entra ID for {scope}: {first} (locally: az login; in CI: the job's "
            f"GitHub OIDC identity, {client_id_variable}/ARM_TENANT_ID)"
        ) from None
