"""The HTTP contract's request side, as pure functions: what function_app.py's triggers accept.

Every route checks its ids with ``check_work_item_id`` before any storage call, so a bad id is the same
400 wherever it arrives. Intake bodies are either the raw document (metadata in headers) or
multipart/form-data; the multipart reader is bounded in part count and header size, so a hostile body
costs time proportional to its length, never to its number of tiny parts.

Only the standard library and ``multipart`` (a small pure-Python parser) are imported here, so the
Function App can use this module at cold start.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from multipart import MultipartError, MultipartSegment, PushMultipartParser, parse_options_header

from claimcheck.envelope import IDENTIFIER, IDENTIFIER_RULE
from claimcheck.errors import UseDirectUpload
from claimcheck.resilience import is_unavailable

# Header → submit() keyword. Multipart requests may carry the same values as form fields instead.
HEADER_FIELDS = {
    "x-tenant-id": "tenant_id",
    "x-purpose": "purpose",
    "x-classification": "classification",
    "x-work-item-id": "work_item_id",
    "x-priority": "priority",
    "x-document-type": "document_type",
    "x-review-required": "review_required",
    "x-correlation-id": "correlation_id",
    "traceparent": "traceparent",
    "tracestate": "tracestate",
}
FORM_FIELDS = frozenset(HEADER_FIELDS.values())
# Intake headers that steer the write itself rather than describe the document (function_app reads them).
INTAKE_CONTROL_HEADERS = ("idempotency-key", "if-match")
REQUIRED_FIELDS = ("tenant_id", "purpose", "classification")
DOCUMENT_PART = "document"

# One document part plus one part per form field is all a valid request needs; the rest is headroom.
MAX_MULTIPART_PARTS = 2 * (len(FORM_FIELDS) + 1)
# Per part header line (name and value) and header count: a Content-Disposition with a long file name
# fits, a header section that is really a payload does not.
MAX_PART_HEADER_BYTES = 4096
MAX_PART_HEADERS = 8
# Form field values are short identifiers and flags; a longer one is refused rather than buffered.
MAX_FIELD_BYTES = 1024
# A Content-Length value: digits only (int() would also take "+1", " 1" or "1_000").
_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")
# ``min_version`` is a version number, not an arbitrarily long digit string for int() to chew on.
MIN_VERSION = re.compile(r"[0-9]{1,18}")
# Multipart is fed to the parser in slices, so its memory stays bounded by the slice, not the body.
_PARSE_SLICE = 64 * 1024


class BadRequest(ValueError):
    """A request the API refuses with 400; ``code`` is the JSON ``error``, ``str()`` its ``message``."""

    def __init__(self, message: str, code: str = "bad_request") -> None:
        super().__init__(message)
        self.code = code


# Seconds a caller waits before sending an intake request again when storage cannot be reached (503).
INTAKE_RETRY_AFTER = 5


class Unavailable:
    """The 503 answer of an intake route (``POST /documents``, a grant, a commit) when storage (or another
    service the request needs) is down or answers 5xx: retrying the same request (same Idempotency-Key)
    later is safe. What the failed attempt left is finished or removed by the reconciler, the key's
    lease and a fresh id's release (docs/local-stack.md, "Crashes and outages")."""

    status = 503
    headers = {"Retry-After": str(INTAKE_RETRY_AFTER)}

    @staticmethod
    def answer(route: str, error: Exception, log: logging.Logger) -> dict[str, Any] | None:
        """The 503 body for ``error`` if it is an outage (logged as exception type names only: the SDK's
        text can quote URLs and request details), else None (the caller re-raises it)."""
        if not is_unavailable(error):
            return None
        cause = error.__cause__
        log.warning(
            "%s unavailable: %s%s",
            route,
            type(error).__name__,
            "" if cause is None else f" from {type(cause).__name__}",
        )
        return {
            "error": "unavailable",
            "message": "storage cannot be reached now; nothing was accepted: send the same request "
            f"(same Idempotency-Key) again after Retry-After ({INTAKE_RETRY_AFTER} s)",
        }


@dataclass(frozen=True)
class Submission:
    """The document bytes, their declared content type and the ``Producer.submit`` keywords."""

    document: bytes
    content_type: str
    fields: dict[str, Any] = field(default_factory=dict)


def check_work_item_id(value: str) -> str:
    """The id itself, or a 400 ``invalid_request`` worded exactly as intake words it."""
    if not IDENTIFIER.fullmatch(value):
        raise BadRequest(f"work_item_id {IDENTIFIER_RULE}", code="invalid_request")
    return value


def parse_min_version(raw: str | None, name: str = "min_version") -> int | None:
    """``min_version`` (or the query parameter ``name``) as an int: ASCII digits only (``str.isdigit``
    also accepts '²' and '٣')."""
    if raw is None:
        return None
    if not MIN_VERSION.fullmatch(raw):
        raise BadRequest(f"{name} must be a whole number of at most 18 digits")
    return int(raw)


# A status answer's ETag: the version it shows and a digest of the whole answer, so that a state change
# within one version is a new ETag (If-None-Match → 304 only when nothing changed) and If-Match can
# still carry the ETag to name the version a conditional write expects.
STATUS_ETAG = re.compile(r'(?:W/)?"v([0-9]{1,18})(?:-[0-9a-f]{1,64})?"')


def status_etag(version: int, body: bytes) -> str:
    return f'"v{version}-{hashlib.sha256(body).hexdigest()[:16]}"'


def parse_if_match(raw: str | None) -> int | None:
    """The version an ``If-Match`` names: the version number itself or a status answer's ETag."""
    if raw is None:
        return None
    value = raw.strip()
    matched = MIN_VERSION.fullmatch(value) or STATUS_ETAG.fullmatch(value)
    if matched is None:
        raise BadRequest("If-Match must be a version number or an ETag of a status answer")
    return int(matched.group(1) if matched.lastindex else matched.group(0))


def none_match(raw: str | None, etag: str) -> bool:
    """True if ``If-None-Match`` lists ``etag`` (or is ``*``): the caller's copy is current (304)."""
    if raw is None:
        return False
    candidates = [part.strip().removeprefix("W/") for part in raw.split(",")]
    return "*" in candidates or etag in candidates


def inline_body(content_length: str | None, read: Callable[[], bytes], cap: int) -> bytes:
    """Intake's request body, at most ``cap`` bytes: a declared ``Content-Length`` above it is refused
    (``UseDirectUpload``) before ``read`` is called, so no byte of it is read; a body without one
    (chunked) is refused once read if longer (the host reads such a body within its own limit, which the
    local stack sets to this cap, and Azure's front end to 100 MB)."""
    if content_length is not None:
        if not _CONTENT_LENGTH.fullmatch(content_length.strip()):
            raise BadRequest("Content-Length must be a whole number")
        if int(content_length) > cap:
            raise UseDirectUpload(_too_large_for_inline(f"this one declares {int(content_length)}", cap))
    body = read()
    if len(body) > cap:
        raise UseDirectUpload(_too_large_for_inline(f"this one has {len(body)}", cap))
    return body


def _too_large_for_inline(size: str, cap: int) -> str:
    return (
        f"POST /api/documents takes request bodies up to {cap} bytes and {size}: send the document "
        "with the direct upload instead (POST /api/uploads, put the bytes to its upload_url, then "
        "POST /api/uploads/{upload_id}/commit; ClaimCheckClient.submit does this by itself)"
    )


def read_submission(headers: Mapping[str, str], body: bytes) -> Submission:
    """An intake request as ``Producer.submit`` arguments; ``BadRequest`` for what cannot be read."""
    lowered = {name.lower(): value for name, value in headers.items()}
    # Required values default to "" so that the producer's own validation names what is missing.
    fields: dict[str, Any] = dict.fromkeys(REQUIRED_FIELDS, "")
    for header, keyword in HEADER_FIELDS.items():
        if header not in lowered:
            continue
        if not lowered[header].strip():
            # Found by the API fuzz: an empty header was read as absent (an empty X-Work-Item-Id made a
            # new work item); the schema gives every one of them a form, so it is refused, named.
            raise BadRequest(f"header {header} is empty: leave it out or give it a value", "invalid_request")
        fields[keyword] = lowered[header]
    content_type = lowered.get("content-type", "")
    document = body
    if content_type.lower().startswith("multipart/form-data"):
        document, content_type, form = read_multipart(content_type, body)
        fields.update(form)
    if "work_item_id" in fields:
        check_work_item_id(str(fields["work_item_id"]))
    if "review_required" in fields:
        fields["review_required"] = _flag("review_required", str(fields["review_required"]))
    return Submission(document, content_type, fields)


def read_multipart(content_type: str, body: bytes) -> tuple[bytes, str, dict[str, str]]:
    """The ``document`` part's bytes and content type, and the known form fields (others are ignored)."""
    _, options = parse_options_header(content_type)
    boundary = options.get("boundary", "")
    if not boundary:
        raise BadRequest("multipart/form-data needs a boundary parameter")
    form = _FormCollector()
    try:
        with PushMultipartParser(
            boundary,
            content_length=len(body),
            max_header_size=MAX_PART_HEADER_BYTES,
            max_header_count=MAX_PART_HEADERS,
            max_segment_count=MAX_MULTIPART_PARTS,
        ) as parser:
            # The last slice is empty: that tells the parser the body ended.
            for start in range(0, len(body) + 1, _PARSE_SLICE):
                for event in parser.parse(body[start : start + _PARSE_SLICE]):
                    form.take(event)
    except MultipartError as error:
        raise BadRequest(f"multipart body refused: {_limit_message(error)}") from None
    if form.document is None:
        raise BadRequest(f"multipart request has no '{DOCUMENT_PART}' part")
    return b"".join(form.document), form.document_type, form.fields


class _FormCollector:
    """Keeps the first ``document`` part and the known fields from the parser's event stream."""

    def __init__(self) -> None:
        self.document: list[bytes] | None = None
        self.document_type = "text/plain"  # a part without Content-Type is text/plain (RFC 7578 §4.4)
        self.fields: dict[str, str] = {}
        self._name: str | None = None
        self._chunks: list[bytes] | None = None  # None: this part is skipped
        self._size = 0

    def take(self, event: MultipartSegment | bytes | None) -> None:
        if isinstance(event, MultipartSegment):
            self._name, self._chunks, self._size = event.name, None, 0
            if event.name == DOCUMENT_PART and self.document is None:
                self.document = self._chunks = []
                self.document_type = event.content_type or self.document_type
            elif event.name in FORM_FIELDS:
                self._chunks = []
        elif event is None:
            if self._chunks is not None and self._chunks is not self.document and self._name:
                self.fields[self._name] = _field_text(self._name, b"".join(self._chunks))
            self._name, self._chunks = None, None
        elif self._chunks is not None:
            self._size += len(event)
            if self._chunks is not self.document and self._size > MAX_FIELD_BYTES:
                raise BadRequest(f"multipart field {self._name!r} is longer than {MAX_FIELD_BYTES} bytes")
            self._chunks.append(event)


def _limit_message(error: MultipartError) -> str:
    """The parser's reason, which names the limit or the malformation (never payload bytes)."""
    text = str(error)
    return text if len(text) <= 200 else text[:200]


def _field_text(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadRequest(f"multipart field {name!r} is not UTF-8 text") from None


def _flag(name: str, raw: str) -> bool:
    """A yes/no field; anything else is refused rather than read as "no"."""
    value = raw.strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise BadRequest(f"{name} must be true or false")
