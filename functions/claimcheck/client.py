"""A small typed client for agents: submit a document once, then wait for an explicit final state.

``submit`` streams the document, always sends an ``Idempotency-Key`` (a retry after a timeout or a 503
answers the first receipt instead of writing again) and retries only what is safe to retry.
``wait`` polls the status API "at least version N" with bounded attempts, full jitter and an absolute
deadline, honouring ``Retry-After``, and ends in the state the API named (docs/architecture.md §8). Delays
come from the one backoff function, ``claimcheck.outcome.compute_backoff``.

Standard library only (``urllib``), so an agent needs nothing but this package.
"""

from __future__ import annotations

import http.client
import io
import json
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO

from claimcheck.blob_upload import UploadFailed, put_blocks
from claimcheck.errors import PayloadTooLarge
from claimcheck.outcome import compute_backoff
from claimcheck.settings import INLINE_REQUEST_MAX_BYTES

# Above this many bytes ``submit`` uses the direct upload (a write-only grant, the bytes straight to Blob
# Storage, then a verified commit): the API's default inline cap (POST /documents refuses a larger body
# with 413 use_direct_upload), well under the platform's 100 MB request limit.
DIRECT_UPLOAD_THRESHOLD = INLINE_REQUEST_MAX_BYTES

# What a bearer token or function key may be sent as: visible ASCII. http.client refuses anything else
# (a key read from a file with its CR, a token with its newline) with an error that quotes the value.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
_UNSENDABLE = (
    "{what} holds a character a header cannot carry (a space, or a line end kept from a file?); "
    "its value is not shown"
)

# Answers after which the same request may succeed: the key makes resending it safe.
_RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_RETRYABLE_CODES = frozenset({"request_in_progress"})


class ApiError(Exception):
    """The API refused the request (or kept failing until the attempts ran out)."""

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body.get('error', 'error')}: {body.get('message', '')}")
        self.status = status
        self.code = str(body.get("error", ""))
        self.body = dict(body)


@dataclass(frozen=True)
class Receipt:
    work_item_id: str
    version: int
    idempotency_key: str
    replayed: bool
    raw: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class FinalState:
    """Where waiting ended. ``next_action`` is the API's, or ``wait`` if the deadline/attempts ran out
    first (``exhausted``): the version is not known to be visible, and that is no reason to write again."""

    visibility: str
    next_action: str
    version: int
    attempts: int
    exhausted: bool
    body: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class _Answer:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]


class ClaimCheckClient:
    def __init__(
        self,
        api_url: str,
        token: Callable[[], str],
        *,
        timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        backoff_base: timedelta = timedelta(milliseconds=500),
        backoff_cap: timedelta = timedelta(seconds=20),
        direct_upload_threshold: int = DIRECT_UPLOAD_THRESHOLD,
        function_key: str | None = None,
    ) -> None:
        """``api_url`` ends in ``/api``; ``token()`` returns a current bearer token for the API.
        Documents longer than ``direct_upload_threshold`` bytes go through ``POST /uploads``.
        ``function_key``: on Azure the routes also need the app's function key (``x-functions-key``)."""
        if urllib.parse.urlsplit(api_url).scheme not in ("http", "https"):
            raise ValueError("api_url must be an http(s) URL")
        self._api = api_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._base = backoff_base
        self._cap = backoff_cap
        self._direct_threshold = direct_upload_threshold
        if function_key is not None and not _HEADER_SAFE.fullmatch(function_key):
            raise ValueError(_UNSENDABLE.format(what="function_key"))
        self._key_header = {} if function_key is None else {"x-functions-key": function_key}

    def submit(
        self,
        source: str | Path | BinaryIO | bytes,
        *,
        tenant_id: str,
        purpose: str,
        classification: str,
        content_type: str,
        work_item_id: str | None = None,
        if_match: int | str | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = 5,
        deadline_seconds: float = 300.0,
    ) -> Receipt:
        """Submit once (retries carry the same key); ``ApiError`` for a refusal that retrying cannot fix.

        A path is reopened for each attempt; a stream is retried only if it can seek back to its start.
        """
        key = idempotency_key or uuid.uuid4().hex
        headers = {
            "Idempotency-Key": key,
            "X-Tenant-Id": tenant_id,
            "X-Purpose": purpose,
            "X-Classification": classification,
            "Content-Type": content_type,
        }
        if work_item_id is not None:
            headers["X-Work-Item-Id"] = work_item_id
        if if_match is not None:
            headers["If-Match"] = str(if_match)
        give_up_at = self._clock() + deadline_seconds
        with _Body(source) as (_, length):
            if length > self._direct_threshold:
                return self._submit_direct(source, headers, key, max_attempts, give_up_at)
        for attempt in range(1, max_attempts + 1):
            with _Body(source) as (body, length):
                answer = self._call("POST", "/documents", headers | {"Content-Length": str(length)}, body)
            if answer.status == 202:
                return _receipt(answer, key)
            if _too_large_for_one_request(answer) and _Body.rewindable(source):
                # The API's inline cap (413 use_direct_upload) or the Functions host's request limit (its
                # own 413, before the app runs) is below this client's threshold; nothing was stored, so
                # the same document (and key) goes through the direct upload instead.
                return self._submit_direct(source, headers, key, max_attempts, give_up_at)
            retryable = _retryable(answer)
            if not retryable or not _Body.rewindable(source) or attempt == max_attempts:
                raise ApiError(answer.status, answer.body)
            if not self._pause(attempt, answer, give_up_at):
                raise ApiError(answer.status, answer.body)
        raise AssertionError("unreachable")  # pragma: no cover

    def _submit_direct(
        self,
        source: str | Path | BinaryIO | bytes,
        headers: dict[str, str],
        key: str,
        max_attempts: int,
        give_up_at: float,
    ) -> Receipt:
        """Grant, put the bytes to the grant's blob (sha256 in the same pass), commit with the same key."""
        described = {name: value for name, value in headers.items() if name not in _CONTROL_HEADERS}
        described["X-Upload-Content-Type"] = described.pop("Content-Type")
        with _Body(source) as (body, length):
            described["X-Upload-Length"] = str(length)
            for attempt in range(1, max_attempts + 1):
                # A grant writes nothing, so any retryable answer (a storage outage's 503) is asked again.
                granted = self._call("POST", "/uploads", described, b"")
                if granted.status == 201:
                    break
                if (
                    not _retryable(granted)
                    or attempt == max_attempts
                    or not self._pause(attempt, granted, give_up_at)
                ):
                    raise ApiError(granted.status, granted.body)
            stream = io.BytesIO(body) if isinstance(body, bytes) else body
            try:
                sent, sha256 = put_blocks(
                    str(granted.body["upload_url"]),
                    stream,
                    block_bytes=int(granted.body["block_bytes"]),
                    timeout=self._timeout,
                    sleep=self._sleep,
                )
            except UploadFailed as failed:
                raise ApiError(
                    failed.status or 503, {"error": "upload_failed", "message": str(failed)}
                ) from None
        commit = headers | {"X-Upload-Length": str(sent), "X-Upload-Sha256": sha256}
        commit["X-Upload-Content-Type"] = commit.pop("Content-Type")
        path = f"/uploads/{urllib.parse.quote(str(granted.body['upload_id']), safe='')}/commit"
        for attempt in range(1, max_attempts + 1):
            answer = self._call("POST", path, commit, b"")
            if answer.status == 202:
                return _receipt(answer, key)
            retryable = _retryable(answer)
            if not retryable or attempt == max_attempts or not self._pause(attempt, answer, give_up_at):
                raise ApiError(answer.status, answer.body)
        raise AssertionError("unreachable")  # pragma: no cover

    def status(self, work_item_id: str, min_version: int | None = None) -> tuple[int, dict[str, Any]]:
        query = "" if min_version is None else f"?min_version={min_version}"
        path = f"/work-items/{urllib.parse.quote(work_item_id, safe='')}{query}"
        answer = self._call("GET", path, {}, None)
        return answer.status, answer.body

    def result(self, work_item_id: str, version: int | None = None) -> tuple[int, dict[str, Any]]:
        """One version's full analysis (``GET /work-items/{id}/result``; default the latest visible)."""
        query = "" if version is None else f"?version={version}"
        answer = self._call(
            "GET", f"/work-items/{urllib.parse.quote(work_item_id, safe='')}/result{query}", {}, None
        )
        return answer.status, answer.body

    def dead_letters(
        self, limit: int | None = None, *, tenant_id: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Operators: the documents queue's dead-lettered messages (``GET /dead-letters``), metadata only.
        ``tenant_id`` (sent as ``X-Tenant-Id``) narrows the list to that one of the caller's granted
        tenants; the API decides, and a tenant the caller is not granted lists nothing."""
        query = "" if limit is None else f"?limit={limit}"
        answer = self._call("GET", "/dead-letters" + query, _tenant_header(tenant_id), None)
        return answer.status, answer.body

    def replay_dead_letter(
        self, sequence_number: int, *, tenant_id: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Operators: replay one dead-lettered message once (resending is safe: the copy's id is fixed).
        ``tenant_id`` (``X-Tenant-Id``) narrows as for ``dead_letters``: a message of another tenant
        answers like a missing one and stays dead-lettered."""
        path = f"/dead-letters/{int(sequence_number)}/replay"
        answer = self._call("POST", path, _tenant_header(tenant_id), b"")
        return answer.status, answer.body

    def wait(self, receipt: Receipt, deadline_seconds: float, *, max_attempts: int = 30) -> FinalState:
        """Poll until the API names a state that is not ``wait``, or the attempts or deadline run out."""
        give_up_at = self._clock() + deadline_seconds
        quoted = urllib.parse.quote(receipt.work_item_id, safe="")
        path = f"/work-items/{quoted}?min_version={receipt.version}"
        answer = _Answer(0, {}, {})
        for attempt in range(1, max_attempts + 1):
            answer = self._call("GET", path, {}, None)
            action = answer.body.get("next_action")
            if answer.status in (200, 404) and action and action != "wait":
                return _final(answer, attempt, exhausted=False)
            if answer.status not in (200, 404) and answer.status not in _RETRYABLE_STATUSES:
                raise ApiError(answer.status, answer.body)
            if not action and answer.status not in _RETRYABLE_STATUSES:
                # Not a status answer (a route that does not exist, a page that is not the API's): no
                # state will ever come from polling it.
                raise ApiError(answer.status, answer.body)
            if attempt == max_attempts or not self._pause(attempt, answer, give_up_at):
                return _final(answer, attempt, exhausted=True)
        return _final(answer, max_attempts, exhausted=True)

    def _pause(self, attempt: int, answer: _Answer, give_up_at: float) -> bool:
        """Sleep before the next attempt (full jitter, at least Retry-After); False if past the deadline."""
        ceiling = compute_backoff(attempt, base=self._base, jitter=False, max_backoff=self._cap)
        delay = random.uniform(0, ceiling.total_seconds())
        retry_after = answer.headers.get("Retry-After", "")
        if retry_after.isascii() and retry_after.isdigit():
            delay = max(delay, float(retry_after))
        if self._clock() + delay >= give_up_at:
            return False
        self._sleep(delay)
        return True

    def _call(self, method: str, path: str, headers: Mapping[str, str], body: Any) -> _Answer:
        token = self._token()
        if not _HEADER_SAFE.fullmatch(token):
            raise ValueError(_UNSENDABLE.format(what="the bearer token"))
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self._api + path,
            data=body,
            method=method,
            headers={
                **headers,
                **self._key_header,
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
            },
        )
        try:
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                    return _Answer(response.status, _json(response.read()), dict(response.headers))
            except urllib.error.HTTPError as error:
                return _Answer(error.code, _json(error.read()), dict(error.headers))
        # No (whole) answer: the request may or may not have been applied. The key makes a resend safe.
        # HTTPException: an answer that broke off (IncompleteRead) or was not HTTP, its body included.
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
            return _Answer(503, {"error": "no_answer", "message": type(error).__name__}, {})


class _Body:
    """The request body for one attempt: a freshly opened file, the bytes, or the caller's stream."""

    def __init__(self, source: str | Path | BinaryIO | bytes) -> None:
        self._source = source
        self._opened: BinaryIO | None = None

    @staticmethod
    def rewindable(source: str | Path | BinaryIO | bytes) -> bool:
        return isinstance(source, str | Path | bytes) or source.seekable()

    def __enter__(self) -> tuple[BinaryIO | bytes, int]:
        source = self._source
        if isinstance(source, bytes):
            return source, len(source)
        if isinstance(source, str | Path):
            self._opened = open(source, "rb")
            stream: BinaryIO = self._opened
        else:
            stream = source
            if stream.seekable():
                stream.seek(0)
        start = stream.tell() if stream.seekable() else 0
        length = stream.seek(0, 2) - start if stream.seekable() else -1
        if stream.seekable():
            stream.seek(start)
        if length < 0:
            raise ValueError("a stream without a known length cannot be streamed: pass a path or bytes")
        return stream, length

    def __exit__(self, *_: object) -> None:
        if self._opened is not None:
            self._opened.close()


_CONTROL_HEADERS = frozenset({"Idempotency-Key", "If-Match"})


def _tenant_header(tenant_id: str | None) -> dict[str, str]:
    """``X-Tenant-Id`` when a tenant is stated: it only selects among the caller's grants (the API's
    ``AccessTable.read_scope``), so sending it can narrow an answer, never widen it."""
    return {} if tenant_id is None else {"X-Tenant-Id": tenant_id}


def _receipt(answer: _Answer, key: str) -> Receipt:
    return Receipt(
        work_item_id=answer.body["work_item_id"],
        version=int(answer.body["receipt"]["version"]),
        idempotency_key=key,
        replayed=answer.headers.get("Idempotent-Replayed") == "true",
        raw=answer.body,
    )


def _too_large_for_one_request(answer: _Answer) -> bool:
    """A 413 that is not the app's policy refusal of the document itself (payload_too_large, which the
    upload would meet too): the app's use_direct_upload, or a host's or front end's refusal of the request
    body, whatever its body (the local host says request_body_too_large). Azure's Functions host has been
    reported to answer a body over FUNCTIONS_REQUEST_BODY_SIZE_LIMIT with a 500 instead
    (Azure/azure-functions-host#10519), which cannot be told from a failure: keep this client's
    direct_upload_threshold at most the stack's inline cap."""
    return answer.status == 413 and answer.body.get("error") != PayloadTooLarge.code


def _json(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        return {"error": "not_json", "message": "the answer was not JSON"}
    return parsed if isinstance(parsed, dict) else {"error": "not_json", "message": "not a JSON object"}


def _retryable(answer: _Answer) -> bool:
    """An answer after which the same request may succeed (the key makes resending it safe)."""
    return answer.status in _RETRYABLE_STATUSES or answer.body.get("error") in _RETRYABLE_CODES


def _final(answer: _Answer, attempts: int, *, exhausted: bool) -> FinalState:
    body = answer.body
    return FinalState(
        visibility=str(body.get("visibility", "")),
        next_action="wait" if exhausted else str(body.get("next_action", "")),
        version=int(body.get("version", 0) or 0),
        attempts=attempts,
        exhausted=exhausted,
        body=body,
    )
