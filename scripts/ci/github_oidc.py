"""Entra tokens from a fresh GitHub OIDC assertion for every token request (workload identity
federation), instead of the one-time assertion azure/login hands the Azure CLI.

azure/login exchanges one GitHub ID token at login; the Azure CLI cannot refresh it (Azure/azure-cli
#28708), so a token requested after it expired (minutes; a `pulumi up` and a remote build take longer)
is refused with AADSTS700024. Here azure-identity's ClientAssertionCredential calls `assertion()` each
time it needs a new access token, and `assertion()` asks the runner for a new ID token, exactly as the
actions toolkit's `core.getIDToken(audience)` does: GET `$ACTIONS_ID_TOKEN_REQUEST_URL` with
`&audience=<url-encoded audience>` appended, `Authorization: Bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`,
answer `{"value": "<jwt>"}`. The runner sets both variables only in a job with `id-token: write`.

The identity is named by ARM_CLIENT_ID and ARM_TENANT_ID, the variables the workflows already set for
the azure-native provider's own OIDC sign-in (one setting for both). The deployed API is called as
another identity when CLAIMCHECK_API_CLIENT_ID names one: the smoke step sets it to the smoke app
(scripts/bootstrap_ci.py), which holds the API's app roles for the smoke tenant and no Azure role,
while ARM requests (listKeys) stay the deploy identity's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.identity import ClientAssertionCredential

AUDIENCE = "api://AzureADTokenExchange"  # what Entra's federated credentials expect
REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"  # noqa: S105 - a variable name
CLIENT_ID = "ARM_CLIENT_ID"
TENANT_ID = "ARM_TENANT_ID"
API_CLIENT_ID = "CLAIMCHECK_API_CLIENT_ID"  # who calls the deployed API, when not ARM_CLIENT_ID
_TIMEOUT_SECONDS = 30.0


class OidcError(Exception):
    """The runner gave no ID token; the message names what to check and never holds a token."""


def request_id_token(url: str, bearer: str, audience: str = AUDIENCE) -> str:
    """A new GitHub ID token for `audience` from the runner's endpoint (actions/toolkit getIDToken)."""
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise OidcError(f"{REQUEST_URL} is not an http(s) URL")
    separator = "&" if urllib.parse.urlsplit(url).query else "?"
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        f"{url}{separator}audience={urllib.parse.quote(audience, safe='')}",
        headers={
            "Authorization": f"Bearer {bearer}",
            "Accept": "application/json",
            "User-Agent": "actions/oidc-client",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as answer:  # noqa: S310
            body = json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise OidcError(
            f"the runner's ID-token endpoint answered {error.code}; does the job have "
            "`permissions: id-token: write`?"
        ) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError) as error:
        raise OidcError(f"cannot get an ID token from the runner ({type(error).__name__})") from None
    value = body.get("value") if isinstance(body, dict) else None
    if not isinstance(value, str) or not value:
        raise OidcError("the runner's ID-token answer has no `value`")
    return value


def github_oidc_credential(
    environ: Mapping[str, str], client_id_variable: str = CLIENT_ID
) -> ClientAssertionCredential | None:
    """The credential for the client id in `client_id_variable` (ARM_CLIENT_ID, or API_CLIENT_ID for
    the API's caller) in ARM_TENANT_ID when the runner can mint ID tokens; None outside such a job (a
    laptop: the caller falls back to DefaultAzureCredential)."""
    url, bearer = environ.get(REQUEST_URL, ""), environ.get(REQUEST_TOKEN, "")
    client_id, tenant_id = environ.get(client_id_variable, ""), environ.get(TENANT_ID, "")
    if not (url and bearer):
        return None
    if not (client_id and tenant_id):
        raise OidcError(
            f"the job can request GitHub ID tokens but {client_id_variable}/{TENANT_ID} are not set: "
            "which identity should sign in?"
        )
    from azure.identity import ClientAssertionCredential

    return ClientAssertionCredential(tenant_id, client_id, lambda: request_id_token(url, bearer))
