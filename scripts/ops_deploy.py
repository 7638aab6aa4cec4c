"""`claimcheck-ops deploy`: the Function App's code to Flex Consumption through OneDeploy, with an Entra
token (basic-auth publishing is off), uploaded only when the package's sha256 changed.

The protocol (what `az functionapp deployment source config-zip` and azd do for Flex Consumption):
1. ARM `GET <app id>` gives the site's tags and its SCM host name (hostNameSslStates, hostType
   Repository); the app must be on the FlexConsumption SKU.
2. The tag `claimcheck-package-sha256` holds the sha256 of the last package this command deployed
   successfully. The same hash means nothing is uploaded.
3. `GET https://<scm host>/api/deployments/latest` (404 before the first deployment) notes the id of
   the latest deployment, so the one this upload starts can be told apart from it.
4. `POST https://<scm host>/api/publish?RemoteBuild=true&Deployer=claimcheck-ops` with
   `Content-Type: application/zip` and `Authorization: Bearer <ARM token>`; RemoteBuild makes the
   platform pip-install requirements.txt. Flex answers 202 with the deployment id (a JSON string).
   OneDeploy without `async` is synchronous and answers 200 once the deployment ended (Kudu's
   OneDeploy and zipdeploy semantics; Azure/functions-action's oneDeployFlex takes a 200 as "passed",
   azure-cli's Flex path polls `/api/deployments/latest`): a 200 or 202 without an id is taken at its
   word only after `/api/deployments/latest` names a deployment other than the one noted in step 3,
   which is then checked like any other; an answer without an id and no new deployment fails.
5. `GET https://<scm host>/api/deployments/<id>` until `complete`/a final status: -1 cancelled,
   0 pending, 1 building, 2 deploying, 3 failed, 4 success, 5 conflict, 6 partial success. The answer
   is 200 whether the deployment runs or ended, so the body decides.
6. After status 4 only, ARM `PATCH <app id>/providers/Microsoft.Resources/tags/default` (Merge) records
   the hash. A failed or interrupted deployment leaves the old hash, so the next run uploads again.

Retries are bounded: 409 (another deployment in progress), 429, 5xx and connection errors are retried
a few times with backoff (Retry-After honoured, capped); 401/403/404 fail at once with what to check.
The bearer token is only ever put in the Authorization header: no message, log line or exception
carries it (error texts are also scrubbed of it).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.ops_errors import OpsError

ARM_ENDPOINT = "https://management.azure.com"
ARM_SCOPE = "https://management.azure.com/.default"
SITE_API_VERSION = "2024-04-01"
TAGS_API_VERSION = "2021-04-01"
PACKAGE_HASH_TAG = "claimcheck-package-sha256"
DEPLOYER = "claimcheck-ops"

STATUS_TEXT = {
    -1: "cancelled",
    0: "pending",
    1: "building",
    2: "deploying",
    3: "failed",
    4: "success",
    5: "conflict (another deployment was in progress)",
    6: "partially successful",
}
SUCCESS = 4
IN_PROGRESS = (0, 1, 2)

TokenProvider = Callable[[str], str]  # scope -> bearer token
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # tries per request, the first one included
    base_delay_s: float = 2.0  # doubled per retry, with jitter
    max_delay_s: float = 30.0  # also caps a server's Retry-After
    request_timeout_s: float = 300.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_delay_s)
        backoff = self.base_delay_s * float(2 ** (attempt - 1))
        return min(backoff, self.max_delay_s) * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class DeployTarget:
    app_id: str  # ARM resource id of the Function App (stack output functionAppId)
    arm_endpoint: str = ARM_ENDPOINT
    scm_url: str | None = None  # override, e.g. https://<host> behind a private endpoint


@dataclass(frozen=True)
class DeployResult:
    sha256: str
    uploaded: bool
    deployment_id: str | None
    status: str
    scm_host: str


@dataclass
class _Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8") or "null")


@dataclass
class _Client:
    token: str
    retry: RetryPolicy
    sleep: Sleep
    progress: Callable[[str], None]
    secrets: list[str] = field(default_factory=list)

    def request(
        self,
        method: str,
        url: str,
        *,
        what: str,
        body: bytes | None = None,
        content_type: str | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> _Response:
        """One request with bounded retries; a non-retryable or exhausted failure is an OpsError."""
        for attempt in range(1, self.retry.attempts + 1):
            response, failure = self._once(method, url, body, content_type)
            if response is not None and response.status in ok:
                return response
            retryable = response is None or response.status in (409, 429) or response.status >= 500
            reason = failure or _explain(response, what)
            if not retryable or attempt == self.retry.attempts:
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise OpsError(self.scrub(f"{what}: {reason}{tries}"))
            delay = self.retry.delay(attempt, response.headers.get("retry-after") if response else None)
            self.progress(
                self.scrub(
                    f"{what}: {reason}; retrying in {delay:.0f} s ({attempt}/{self.retry.attempts - 1})"
                )
            )
            self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(
        self, method: str, url: str, body: bytes | None, content_type: str | None
    ) -> tuple[_Response | None, str | None]:
        if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
            return None, f"refusing {url!r}: only http(s) URLs are used"
        request = urllib.request.Request(url, data=body, method=method)  # noqa: S310  (scheme checked)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=self.retry.request_timeout_s) as answer:  # noqa: S310
                return _Response(answer.status, _lower(answer.headers.items()), answer.read()), None
        except urllib.error.HTTPError as error:
            return _Response(error.code, _lower(error.headers.items()), error.read()), None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            return None, f"cannot reach {urllib.parse.urlsplit(url).netloc}: {reason}"

    def scrub(self, text: str) -> str:
        for secret in (self.token, *self.secrets):
            if secret:
                text = text.replace(secret, "***")
        return text


def _lower(items: Any) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in items}


def _explain(response: _Response | None, what: str) -> str:
    """What a status means for this command, plus the service's own short message."""
    assert response is not None
    hints = {
        401: "401 Unauthorized: the token was refused; sign in to the app's tenant (az login / azure/login "
        "with OIDC) so DefaultAzureCredential gets an ARM token",
        403: "403 Forbidden: the identity may not do this; it needs Contributor on the Function App (or "
        "Website Contributor plus Tag Contributor), and the SCM site's access restrictions must "
        "admit this machine",
        404: "404 Not Found: no such app or deployment; check the app id (stack output functionAppId) "
        "and that `pulumi up` created it",
        409: "409 Conflict: another deployment is in progress on this app",
        429: "429 Too Many Requests",
    }
    text = hints.get(response.status, f"HTTP {response.status}")
    detail = _service_message(response.body)
    return f"{text} ({detail})" if detail else text


def _service_message(body: bytes) -> str:
    """The first line of an error body (ARM's error.message or plain text), bounded."""
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict):
            error = parsed.get("error")
            message = error.get("message") if isinstance(error, dict) else parsed.get("Message")
            return str(message or "")[:300]
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:300] if text else ""


def package_sha256(package: Path) -> str:
    return hashlib.sha256(package.read_bytes()).hexdigest()


def scm_host(site: dict[str, Any]) -> str:
    """The SCM (Kudu) host of a site: the Repository entry of hostNameSslStates."""
    states = site.get("properties", {}).get("hostNameSslStates") or []
    for state in states:
        if str(state.get("hostType", "")).lower() == "repository" and state.get("name"):
            return str(state["name"])
    enabled = site.get("properties", {}).get("enabledHostNames") or []
    for name in enabled:
        if ".scm." in str(name):
            return str(name)
    raise OpsError("the app's ARM record names no SCM host (hostNameSslStates has no Repository entry)")


def deploy_package(
    package: Path,
    target: DeployTarget,
    token_provider: TokenProvider,
    *,
    force: bool = False,
    timeout_s: float = 900.0,
    poll_interval_s: float = 2.0,
    retry: RetryPolicy | None = None,
    sleep: Sleep = time.sleep,
    progress: Callable[[str], None] = lambda line: None,
) -> DeployResult:
    """Deploys `package` unless the app already runs a package with its sha256; waits for the result."""
    if not package.is_file():
        raise OpsError(f"no package at {package}; run `make package` first")
    digest = package_sha256(package)
    client = _Client(token_provider(ARM_SCOPE), retry or RetryPolicy(), sleep, progress)
    arm_site = f"{target.arm_endpoint.rstrip('/')}{target.app_id}"
    site = client.request(
        "GET",
        f"{arm_site}?api-version={SITE_API_VERSION}",
        what="reading the Function App from Azure Resource Manager",
    ).json()
    sku = str(site.get("properties", {}).get("sku", ""))
    if sku and sku.lower() != "flexconsumption":
        raise OpsError(f"the app runs on the {sku} plan; this command deploys to Flex Consumption only")
    host = scm_host(site)
    deployed = (site.get("tags") or {}).get(PACKAGE_HASH_TAG)
    if deployed == digest and not force:
        return DeployResult(digest, uploaded=False, deployment_id=None, status="unchanged", scm_host=host)
    scm = (target.scm_url or f"https://{host}").rstrip("/")
    before = _latest_deployment_id(client, scm)
    progress(f"uploading {package.name} ({package.stat().st_size} bytes, sha256 {digest[:12]}) to {host}")
    answer = client.request(
        "POST",
        f"{scm}/api/publish?RemoteBuild=true&Deployer={DEPLOYER}",
        what="uploading the package (OneDeploy /api/publish)",
        body=package.read_bytes(),
        content_type="application/zip",
        ok=(200, 202),
    )
    deployment_id = _deployment_id(answer) or _new_latest(client, scm, before, answer.status)
    status = _wait(
        client, f"{scm}/api/deployments/{deployment_id}", timeout_s, poll_interval_s, sleep, progress
    )
    client.request(
        "PATCH",
        f"{arm_site}/providers/Microsoft.Resources/tags/default?api-version={TAGS_API_VERSION}",
        what=f"recording the deployed package hash in the app's tag {PACKAGE_HASH_TAG}",
        body=json.dumps({"operation": "Merge", "properties": {"tags": {PACKAGE_HASH_TAG: digest}}}).encode(),
        content_type="application/json",
    )
    return DeployResult(digest, uploaded=True, deployment_id=deployment_id, status=status, scm_host=host)


def _deployment_id(answer: _Response) -> str | None:
    """The id a publish answer carries (a JSON string, or an object with `id`), else None."""
    try:
        value = answer.json()
    except ValueError:
        value = None
    if isinstance(value, dict):
        value = value.get("id")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _latest_deployment_id(client: _Client, scm: str) -> str | None:
    """The id of the app's latest deployment; None before the first one (404)."""
    response = client.request(
        "GET", f"{scm}/api/deployments/latest", what="reading the latest deployment", ok=(200, 404)
    )
    return None if response.status == 404 else _deployment_id(response)


def _new_latest(client: _Client, scm: str, before: str | None, status: int) -> str:
    """After a publish answer without an id: the deployment it started, if the app lists a new one."""
    latest = _latest_deployment_id(client, scm)
    if latest is None or latest == before:
        raise OpsError(
            f"the publish endpoint answered {status} without a deployment id and the app lists no new "
            "deployment (/api/deployments/latest); check the app's deployment log"
        )
    client.progress(f"the publish endpoint answered {status} without an id; following deployment {latest}")
    return latest


def _wait(
    client: _Client,
    url: str,
    timeout_s: float,
    interval_s: float,
    sleep: Sleep,
    progress: Callable[[str], None],
) -> str:
    """Polls the deployment until a final status, the deadline or the poll budget (timeout / interval,
    which bounds the wait even when the clock does not move); only status 4 returns."""
    deadline = time.monotonic() + timeout_s
    polls = max(1, int(timeout_s / interval_s))
    last = None
    not_found = 0
    for poll in range(1, polls + 1):
        response = client.request("GET", url, what="reading the deployment status", ok=(200, 202, 404))
        if response.status == 404:
            not_found += 1  # a new deployment can take a moment to be listed
            if not_found > 3:
                raise OpsError(
                    "the deployment status is no longer available (404) before it completed; "
                    "check the app's deployment log, then run `claimcheck-ops smoke`"
                )
        else:
            record = response.json() or {}
            status = int(record.get("status", 0))
            if status != last:
                progress(f"deployment {record.get('id', '')}: {STATUS_TEXT.get(status, status)}")
                last = status
            if status == SUCCESS:
                return STATUS_TEXT[SUCCESS]
            if status not in IN_PROGRESS:
                errors = "; ".join(str(e) for e in (record.get("build_summary") or {}).get("errors") or [])
                detail = record.get("status_text") or errors or "no detail given"
                raise OpsError(client.scrub(f"deployment {STATUS_TEXT.get(status, status)}: {detail}"))
        if time.monotonic() >= deadline or poll == polls:
            break
        sleep(interval_s)
    state = STATUS_TEXT.get(last, str(last)) if last is not None else "unknown"
    raise OpsError(
        f"the deployment did not finish within {timeout_s:.0f} s (last status: {state}); it may "
        "still complete: check the app's deployment log"
    )


def function_key(
    target: DeployTarget, token_provider: TokenProvider, *, retry: RetryPolicy | None = None
) -> str:
    """The app's default function key, from ARM (`POST <app id>/host/default/listKeys`), as `az
    functionapp keys list` reads it, but with this command's token (no Azure CLI session). The key is
    returned to the caller only: no message or exception carries it."""
    client = _Client(token_provider(ARM_SCOPE), retry or RetryPolicy(), time.sleep, lambda line: None)
    site = f"{target.arm_endpoint.rstrip('/')}{target.app_id}"
    url = f"{site}/host/default/listKeys?api-version={SITE_API_VERSION}"
    answer = client.request("POST", url, what="reading the app's function key (listKeys)", body=b"")
    try:
        keys = answer.json() or {}
    except ValueError:
        keys = {}
    key = (keys.get("functionKeys") or {}).get("default") if isinstance(keys, dict) else None
    if not isinstance(key, str) or not key:
        raise OpsError("the app's listKeys answer holds no default function key")
    return key
