"""The Function App's HTTP API as `claimcheck-ops send` and `show` use it.

`send` is claimcheck.client.ClaimCheckClient (the agents' client, standard library only): the document
streamed from disk, the direct upload above the inline cap, an Idempotency-Key on every attempt. No
response or error text ever echoes document bytes, because the API returns JSON metadata only.
"""

from __future__ import annotations

import json
import mimetypes
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.ops_errors import OpsError
from scripts.ops_token import TokenSource

DEFAULT_API = "http://localhost:7071/api"
_TIMEOUT_SECONDS = 60.0

# Intake metadata travels in headers so the body stays the raw document (functions/function_app.py
# reads the same names).
TENANT_HEADER = "X-Tenant-Id"
PURPOSE_HEADER = "X-Purpose"
CLASSIFICATION_HEADER = "X-Classification"
PRIORITY_HEADER = "X-Priority"
WORK_ITEM_HEADER = "X-Work-Item-Id"
# The Function App's routes use AuthLevel.FUNCTION: on Azure a function or host key comes along too,
# but only the bearer token identifies the caller.
FUNCTION_KEY_HEADER = "x-functions-key"
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what a key may be sent as


@dataclass(frozen=True)
class DocumentRequest:
    path: Path
    tenant: str
    purpose: str
    classification: str
    content_type: str | None = None
    priority: str | None = None
    work_item_id: str | None = None
    if_match: str | None = None  # the version (or status ETag) this write replaces
    new_version: bool = False  # read the work item's current version first and send it as If-Match
    idempotency_key: str | None = None

    @property
    def media_type(self) -> str:
        return self.content_type or mimetypes.guess_type(self.path.name)[0] or "application/octet-stream"


class SendProgress:
    """How far a send got, for the one line an interrupt ends with: nothing sent, or sent under this
    idempotency key (whose resend answers the first receipt, never a second write)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.sent = False
        self.receipt: dict[str, Any] | None = None

    def interrupted(self) -> str:
        if self.receipt is not None:
            return f"the document was accepted: work item {self.receipt.get('work_item_id')}"
        if not self.sent:
            return "the document was not accepted: nothing was sent"
        return (
            "the document was not accepted, or was and its receipt was not read: send it again with "
            f"--idempotency-key {self.key} (answers the first receipt, writes nothing twice)"
        )


def maximum_document_bytes() -> int:
    """The API's maximum document size: CLAIMCHECK_MAX_PAYLOAD_BYTES as the Function App reads it (its
    default, 2 GiB, unless this environment sets it as the app's does)."""
    from claimcheck.settings import Settings, SettingsError

    try:
        return Settings.from_env(os.environ).max_payload_bytes
    except SettingsError as exc:
        raise OpsError(str(exc)) from None


def send_document(
    api: str,
    request: DocumentRequest,
    tokens: TokenSource,
    function_key: str | None = None,
    progress: SendProgress | None = None,
) -> dict[str, Any]:
    """Submit the document as ClaimCheckClient.submit does (claimcheck/client.py): one POST /documents
    up to the inline cap, else the direct upload (a write-only grant, the bytes straight to Blob
    Storage, a verified commit), an Idempotency-Key on every attempt. A file over the API's maximum is
    refused from its size before a byte is read. Returns the API's 202 answer."""
    from claimcheck.client import ApiError

    try:
        size = request.path.stat().st_size
    except OSError as exc:
        raise OpsError(f"cannot read {request.path}: {exc.strerror}") from None
    if request.path.is_dir():  # the same failure, exit code and wording as a missing file
        raise OpsError(f"cannot read {request.path}: Is a directory (give a file)")
    maximum = maximum_document_bytes()
    if size > maximum:
        raise OpsError(
            f"{request.path.name} is {size} bytes, over the API's maximum of {maximum} bytes "
            "(payload_too_large); nothing was sent"
        )
    progress = progress or SendProgress(request.idempotency_key or uuid.uuid4().hex)
    client = _client(api, tokens, function_key, request.priority, progress)
    if_match = request.if_match
    try:
        if request.new_version:
            if_match = _current_version(client, request)
        receipt = client.submit(
            request.path,
            tenant_id=request.tenant,
            purpose=request.purpose,
            classification=request.classification,
            content_type=request.media_type,
            work_item_id=request.work_item_id,
            if_match=if_match,
            idempotency_key=progress.key,
        )
    except ApiError as exc:
        raise OpsError(f"document {request.path.name}: {_api_error_text(api, exc)}") from None
    except OSError as exc:
        raise OpsError(f"cannot read {request.path}: {exc.strerror}") from None
    except ValueError as exc:  # the client's refusal of an unsendable token or key (value not shown)
        raise OpsError(str(exc)) from None
    progress.receipt = dict(receipt.raw)
    return progress.receipt


def _current_version(client: Any, request: DocumentRequest) -> str | None:
    """The work item's current version (GET /work-items/{id}), the If-Match of its next version; None
    when the work item does not exist yet (its first version needs none)."""
    from claimcheck.client import ApiError

    if not request.work_item_id:
        raise OpsError("--new-version needs --work-item-id: the work item to add a version to")
    status, body = client.status(request.work_item_id)
    if status == 404:
        return None
    if status != 200:
        raise ApiError(status, body)
    return str(body["version"])


def _client(
    api: str, tokens: TokenSource, function_key: str | None, priority: str | None, progress: SendProgress
) -> Any:
    from claimcheck.client import ClaimCheckClient

    _url(api, "")  # a malformed API URL is named before any token is asked for
    token = tokens.token(api)  # once: a send is far shorter than a token's lifetime

    class OpsClient(ClaimCheckClient):
        """ClaimCheckClient plus the routing priority (its submit has no parameter for X-Priority, which
        POST /documents, the grant and the commit all read), noting when a write was first sent."""

        def _call(self, method: str, path: str, headers: Mapping[str, str], body: Any) -> Any:
            if method == "POST":
                progress.sent = True
            extra = {PRIORITY_HEADER: priority} if priority else {}
            return super()._call(method, path, {**headers, **extra}, body)

    try:
        return OpsClient(api, lambda: token, function_key=function_key or None, sleep=_announced_pause)
    except ValueError:
        raise OpsError(
            "the function key (--function-key / CLAIMCHECK_API_KEY) holds a character a header cannot "
            "carry (a space, or a line end kept from a file?); its value is not shown"
        ) from None


def _announced_pause(seconds: float) -> None:
    """The client's pause before it tries again (no answer, 503, a block upload that failed), said on
    stderr so that a wait of seconds is never silent; stdout keeps only the receipt."""
    print(f"no answer or busy; trying again in {seconds:.1f} s", file=sys.stderr, flush=True)
    time.sleep(seconds)


def _api_error_text(api: str, error: Any) -> str:
    body = error.body
    if error.code == "no_answer":
        return f"cannot reach the API at {api} ({body.get('message')}): is it running?"
    parts = [str(body[key]) for key in ("error", "message", "reason") if body.get(key)]
    return f"API answered {error.status} " + (": ".join(dict.fromkeys(parts)) or "without a reason")


def get_work_item(
    api: str,
    work_item_id: str,
    tokens: TokenSource,
    min_version: int | None = None,
    function_key: str | None = None,
) -> dict[str, Any]:
    """GET `/work-items/{id}`, optionally asking for at least version `min_version`."""
    query = f"?{urllib.parse.urlencode({'min_version': min_version})}" if min_version is not None else ""
    url = _url(api, f"work-items/{urllib.parse.quote(work_item_id, safe='')}") + query
    headers = {"Accept": "application/json"} | _auth_headers(api, tokens, function_key)
    http_request = urllib.request.Request(url, headers=headers)  # noqa: S310
    return _call(http_request, what=f"work item {work_item_id}")


def _auth_headers(api: str, tokens: TokenSource, function_key: str | None) -> dict[str, str]:
    _url(api, "")  # a malformed API URL is named before any token is asked for
    # urllib refuses such a header with a ValueError quoting it, which _call would take for a non-JSON
    # answer: named here, the value never shown, nothing sent.
    if function_key and not _HEADER_SAFE.fullmatch(function_key):
        raise OpsError(
            "the function key (--function-key / CLAIMCHECK_API_KEY) holds a character a header cannot "
            "carry (a space, or a line end kept from a file?); its value is not shown"
        )
    headers = {"Authorization": f"Bearer {tokens.token(api)}"}
    return headers | ({FUNCTION_KEY_HEADER: function_key} if function_key else {})


def _url(api: str, path: str) -> str:
    parsed = urllib.parse.urlparse(api)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        raise OpsError(f"--api must be an http(s) URL such as {DEFAULT_API}, got {api!r}")
    return f"{api.rstrip('/')}/{path}"


def _call(http_request: urllib.request.Request, *, what: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(http_request, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise OpsError(f"{what}: API answered {exc.code} {_error_text(exc)}") from None
    except urllib.error.URLError as exc:
        raise OpsError(f"cannot reach the API at {http_request.full_url}: {exc.reason}") from None
    except (TimeoutError, ConnectionError) as exc:
        raise OpsError(f"the API at {http_request.full_url} did not answer: {exc}") from None
    except ValueError:
        raise OpsError(f"{what}: the API answered something that is not JSON") from None
    if not isinstance(answer, dict):
        raise OpsError(f"{what}: the API answered JSON that is not an object")
    return answer


def _error_text(error: urllib.error.HTTPError) -> str:
    """The API's JSON error (`code`, `error`/`message`) in one line, or the HTTP reason phrase."""
    try:
        body = json.loads(error.read(64 * 1024) or b"{}")
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        return str(error.reason)
    parts = [str(body[key]) for key in ("code", "error", "message", "reason") if body.get(key)]
    return ": ".join(dict.fromkeys(parts)) or str(error.reason)
