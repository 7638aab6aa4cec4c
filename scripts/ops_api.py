"""The Function App's HTTP API as `claimcheck-ops send` and `show` use it (stdlib urllib only).

The document is streamed from disk (Content-Length set, so urllib sends the file object in chunks);
no response or error text ever echoes document bytes, because the API returns JSON metadata only.
"""

from __future__ import annotations

import json
import mimetypes
import re
import urllib.error
import urllib.parse
import urllib.request
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

    def headers(self) -> dict[str, str]:
        content_type = (
            self.content_type or mimetypes.guess_type(self.path.name)[0] or "application/octet-stream"
        )
        headers = {
            "Content-Type": content_type,
            TENANT_HEADER: self.tenant,
            PURPOSE_HEADER: self.purpose,
            CLASSIFICATION_HEADER: self.classification,
            "Accept": "application/json",
        }
        if self.priority:
            headers[PRIORITY_HEADER] = self.priority
        if self.work_item_id:
            headers[WORK_ITEM_HEADER] = self.work_item_id
        return headers


def send_document(
    api: str, request: DocumentRequest, tokens: TokenSource, function_key: str | None = None
) -> dict[str, Any]:
    """POST the document to `/documents`; return the receipt (the API's 202 JSON answer)."""
    try:
        size = request.path.stat().st_size
        document = request.path.open("rb")
    except OSError as exc:
        raise OpsError(f"cannot read {request.path}: {exc.strerror}") from None
    with document:
        headers = request.headers() | {"Content-Length": str(size)} | _auth_headers(api, tokens, function_key)
        http_request = urllib.request.Request(  # noqa: S310 - the API base is an operator-given http(s) URL
            _url(api, "documents"), data=document, headers=headers, method="POST"
        )
        return _call(http_request, what=f"document {request.path.name}")


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
