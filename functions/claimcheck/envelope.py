"""Envelope v1: the JSON body of a claim-check message, with a strict parser.

The body names its schema and version (``"schema": "claimcheck.envelope"``, ``"schema_version":
"1.<minor>"``). An unknown major version is refused. Within major 1, a body from a newer minor may
carry fields this consumer does not know (they are ignored); a body from a known minor may not.
A by-reference envelope carries no payload bytes, no URL and no secret, and stays under 1 KiB.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from claimcheck.errors import InvalidEnvelope, UnsupportedSchemaVersion
from claimcheck.messages import ApplicationValue, OutboundMessage
from claimcheck.policy import Classification
from claimcheck.refs import is_well_formed_ref
from claimcheck.timestamps import format_timestamp

SCHEMA_NAME = "claimcheck.envelope"
SCHEMA_MAJOR = 1
SCHEMA_MINOR = 0
ENVELOPE_CONTENT_TYPE = "application/json"
MAX_REFERENCE_ENVELOPE_BYTES = 1024
# The application properties ``to_message`` sets for routing (the trace context aside): what intake
# records of a message with its envelope (claimcheck.provenance), so a copy stating others is refused.
ROUTING_PROPERTIES = ("tenant", "purpose", "priority", "document_type", "review_required", "schema")

# Identifiers become table keys, session ids and message properties: a safe alphabet, bounded length.
IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
IDENTIFIER_RULE = "must be 1-64 characters of letters, digits, '.', '_', ':' or '-', starting alphanumeric"
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_TEXT = 100

T = TypeVar("T")

_FIELDS = frozenset(
    {
        "schema",
        "schema_version",
        "work_item_id",
        "payload_ref",
        "payload_inline",
        "payload_version",
        "content_type",
        "content_length",
        "checksum",
        "classification",
        "tenant_id",
        "purpose",
        "environment",
        "created_at",
        "expires_at",
        "correlation_id",
    }
)


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    value: str


@dataclass(frozen=True)
class Envelope:
    """One validated envelope. Exactly one of ``payload_ref`` / ``payload_inline`` is set."""

    work_item_id: str
    payload_ref: str | None
    payload_inline: bytes | None
    payload_version: int
    content_type: str
    content_length: int
    checksum: Checksum
    classification: Classification
    tenant_id: str
    purpose: str
    environment: str
    created_at: datetime
    expires_at: datetime
    correlation_id: str | None

    def __post_init__(self) -> None:
        # Build-time validation reuses the parser's rules: an invalid envelope cannot be sent either.
        _validate(self)

    @property
    def message_id(self) -> str:
        return message_id_for(self.work_item_id, self.payload_version, self.purpose)

    def to_json(self) -> bytes:
        document: dict[str, Any] = {
            "schema": SCHEMA_NAME,
            "schema_version": f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}",
            "work_item_id": self.work_item_id,
            "payload_version": self.payload_version,
            "content_type": self.content_type,
            "content_length": self.content_length,
            "checksum": {"algorithm": self.checksum.algorithm, "value": self.checksum.value},
            "classification": self.classification.value,
            "tenant_id": self.tenant_id,
            "purpose": self.purpose,
            "environment": self.environment,
            "created_at": format_timestamp(self.created_at),
            "expires_at": format_timestamp(self.expires_at),
            "correlation_id": self.correlation_id,
        }
        if self.payload_ref is not None:
            document["payload_ref"] = self.payload_ref
        else:
            assert self.payload_inline is not None
            document["payload_inline"] = base64.b64encode(self.payload_inline).decode("ascii")
        return json.dumps(document, separators=(",", ":"), sort_keys=True).encode("utf-8")

    def to_message(
        self,
        *,
        priority: str,
        document_type: str | None,
        review_required: bool,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> OutboundMessage:
        """The queue message: routing values as application properties, so filters never parse JSON;
        the W3C trace context (``traceparent``, ``tracestate``) too, so the consumer's span links to
        the producer's."""
        properties: dict[str, ApplicationValue] = {
            "tenant": self.tenant_id,
            "purpose": self.purpose,
            "priority": priority,
            "document_type": document_type or "unknown",
            "review_required": review_required,
            "schema": f"{SCHEMA_NAME}/{SCHEMA_MAJOR}",
        }
        if traceparent is not None:
            properties["traceparent"] = traceparent
            if tracestate is not None:
                properties["tracestate"] = tracestate
        return OutboundMessage(
            body=self.to_json(),
            message_id=self.message_id,
            content_type=ENVELOPE_CONTENT_TYPE,
            session_id=self.work_item_id,
            correlation_id=self.correlation_id,
            subject=self.purpose,
            application_properties=properties,
            time_to_live=None,
        )


def message_id_for(work_item_id: str, version: int, purpose: str) -> str:
    """Deterministic per (work item, version, purpose): the broker's duplicate detection key."""
    digest = hashlib.sha256(f"{work_item_id}\x1f{version}\x1f{purpose}".encode()).hexdigest()
    return f"env-{digest[:40]}"


def parse_envelope(body: bytes) -> Envelope:
    """Parse and validate a message body; raise ``InvalidEnvelope`` / ``UnsupportedSchemaVersion``."""
    try:
        document = json.loads(body, object_pairs_hook=_reject_duplicate_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: json nests without limit, so '[' * 100_000 would otherwise escape as a crash.
        raise InvalidEnvelope("body", f"not a JSON document ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise InvalidEnvelope("body", "must be a JSON object")
    if document.get("schema") != SCHEMA_NAME:
        raise InvalidEnvelope("schema", f"must be {SCHEMA_NAME!r}")
    minor = _schema_minor(document.get("schema_version"))
    if minor <= SCHEMA_MINOR:
        unknown = sorted(set(document) - _FIELDS)
        if unknown:
            raise InvalidEnvelope(unknown[0], "unknown field for this schema version")
    ref = _optional(document, "payload_ref", str)
    inline_text = _optional(document, "payload_inline", str)
    if (ref is None) == (inline_text is None):
        raise InvalidEnvelope("payload_ref", "exactly one of payload_ref and payload_inline is required")
    inline = None if inline_text is None else _decode_inline(inline_text)
    checksum = _required(document, "checksum", dict)
    return Envelope(
        work_item_id=_required(document, "work_item_id", str),
        payload_ref=ref,
        payload_inline=inline,
        payload_version=_required(document, "payload_version", int),
        content_type=_required(document, "content_type", str),
        content_length=_required(document, "content_length", int),
        checksum=Checksum(
            algorithm=_required(checksum, "algorithm", str, prefix="checksum."),
            value=_required(checksum, "value", str, prefix="checksum."),
        ),
        classification=_classification(_required(document, "classification", str)),
        tenant_id=_required(document, "tenant_id", str),
        purpose=_required(document, "purpose", str),
        environment=_required(document, "environment", str),
        created_at=_timestamp(document, "created_at"),
        expires_at=_timestamp(document, "expires_at"),
        correlation_id=_optional(document, "correlation_id", str),
    )


def _validate(envelope: Envelope) -> None:
    for name in ("work_item_id", "tenant_id", "purpose", "environment"):
        if not IDENTIFIER.fullmatch(getattr(envelope, name)):
            raise InvalidEnvelope(name, IDENTIFIER_RULE)
    if envelope.payload_ref is not None and not is_well_formed_ref(envelope.payload_ref):
        raise InvalidEnvelope("payload_ref", "is not a well-formed reference")
    if envelope.payload_version < 1:
        raise InvalidEnvelope("payload_version", "must be a positive integer")
    if envelope.content_length < 1:
        raise InvalidEnvelope("content_length", "must be a positive integer")
    if not envelope.content_type or len(envelope.content_type) > MAX_TEXT:
        raise InvalidEnvelope("content_type", f"must be 1-{MAX_TEXT} characters")
    if envelope.checksum.algorithm != "sha256":
        raise InvalidEnvelope("checksum.algorithm", "only 'sha256' is supported")
    if not SHA256_HEX.fullmatch(envelope.checksum.value):
        raise InvalidEnvelope("checksum.value", "must be 64 lowercase hexadecimal characters")
    if envelope.correlation_id is not None and not IDENTIFIER.fullmatch(envelope.correlation_id):
        raise InvalidEnvelope("correlation_id", IDENTIFIER_RULE)
    if envelope.expires_at <= envelope.created_at:
        raise InvalidEnvelope("expires_at", "must be after created_at")


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            raise InvalidEnvelope(key, "appears twice")
        document[key] = value
    return document


def _schema_minor(raw: object) -> int:
    if not isinstance(raw, str) or not re.fullmatch(r"\d{1,4}\.\d{1,4}", raw):
        raise InvalidEnvelope("schema_version", "must be a 'major.minor' string")
    major, minor = (int(part) for part in raw.split("."))
    if major != SCHEMA_MAJOR:
        raise UnsupportedSchemaVersion(
            f"envelope schema version {raw} is not supported; this consumer reads major {SCHEMA_MAJOR}"
        )
    return minor


def _required(document: dict[str, Any], name: str, kind: type[T], *, prefix: str = "") -> T:
    if name not in document or document[name] is None:
        raise InvalidEnvelope(prefix + name, "is required")
    return _typed(document[name], prefix + name, kind)


def _optional(document: dict[str, Any], name: str, kind: type[T]) -> T | None:
    value = document.get(name)
    return None if value is None else _typed(value, name, kind)


def _typed(value: object, name: str, kind: type[T]) -> T:
    # bool is an int in Python; a JSON true is never a valid count or version.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidEnvelope(name, f"must be of type {kind.__name__}")
    return value


def _decode_inline(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidEnvelope("payload_inline", "is not valid base64") from None


def _classification(raw: str) -> Classification:
    try:
        return Classification(raw)
    except ValueError:
        raise InvalidEnvelope("classification", "is not a known classification") from None


def _timestamp(document: dict[str, Any], name: str) -> datetime:
    raw = _required(document, name, str)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidEnvelope(name, "is not an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise InvalidEnvelope(name, "must carry a time zone")
    return moment
