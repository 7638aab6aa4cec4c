"""Is this delivery the message intake published? (docs/architecture.md, "The queue is untrusted input")

Anyone holding send rights on the documents queue can write any body, session id and properties. What
a message states is therefore checked against what intake recorded, with the app's own identity, for
the version it names: the work item's row (tenant, purpose) and the receipt of that version (transport,
reference, length, sha256, and the digest of the whole message as published: envelope, session id and
routing properties). A message that differs is refused before anything is read or written for it, and
only a message that matches is attributed to a work item (its failure recorded, its dead letter shown to
the record's tenant).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from claimcheck.envelope import ROUTING_PROPERTIES, Envelope, parse_envelope
from claimcheck.errors import AccessDenied, MessageRejected
from claimcheck.messages import InboundMessage
from claimcheck.policy import UNRESOLVABLE
from claimcheck.receipts import WriteReceipt
from claimcheck.workitems import WorkItemRecord


@dataclass(frozen=True)
class Stated:
    """What one message states about itself: its envelope, its session id and its properties."""

    envelope: Envelope
    session_id: str | None
    properties: Mapping[str, Any]

    @property
    def sha256(self) -> str:
        return message_sha256(self.envelope, self.session_id, self.properties)


def message_sha256(envelope: Envelope, session_id: str | None, properties: Mapping[str, Any]) -> str:
    """The digest intake records of the message it publishes, and the consumer of the one it received.

    Over the envelope's canonical JSON (``Envelope.to_json``: sorted keys, so a re-formatted body of the
    same envelope has the same digest), the session id and the routing properties; the trace context
    is left out (a replayed copy, or a hop, may carry another one)."""
    stated = {
        "session_id": session_id,
        "properties": {name: properties.get(name) for name in ROUTING_PROPERTIES},
    }
    routing = json.dumps(stated, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(envelope.to_json() + b"\n" + routing).hexdigest()


def verify(stated: Stated, work_item: WorkItemRecord | None) -> WriteReceipt | None:
    """The receipt intake recorded for this message's version, or None when there is none: no row, or a
    version without a receipt (above the confirmed one, which the producer may still be confirming and
    admission waits for within its grace; one never confirmed; one so old its receipt is no longer
    kept). Nothing runs, and nothing is written, for a message without a receipt. Raises ``AccessDenied``
    naming what differs when the message is not what intake published: a forgery, or a genuine envelope
    re-sent under another session or with other properties."""
    envelope = stated.envelope
    if stated.session_id != envelope.work_item_id:
        raise AccessDenied("the message's session id is not its envelope's work item")
    if work_item is None:
        return None
    version = envelope.payload_version
    if (envelope.tenant_id, envelope.purpose) != (work_item.tenant_id, work_item.purpose):
        raise AccessDenied(UNRESOLVABLE)
    for name, recorded in (("tenant", work_item.tenant_id), ("purpose", work_item.purpose)):
        if stated.properties.get(name) != recorded:
            raise AccessDenied(f"the message's {name} property differs from its work item's record")
    receipt = next((kept for kept in work_item.receipts if kept.version == version), None)
    if receipt is None:
        return None  # not confirmed (yet, or ever), or so old its receipt is no longer kept
    # Another work item's or version's reference: the answer of an unknown one.
    if envelope.payload_ref != receipt.payload_ref and envelope.payload_ref is not None:
        raise AccessDenied(UNRESOLVABLE)
    transport = "inline" if envelope.payload_ref is None else "reference"
    compared: tuple[tuple[str, object, object], ...] = (
        ("transport", transport, receipt.transport),
        ("content_length", envelope.content_length, receipt.content_length),
        ("checksum", envelope.checksum.value, receipt.sha256),
    )
    for field_name, declared, kept in compared:
        if declared != kept:
            raise AccessDenied(f"the envelope's {field_name} differs from the receipt of version {version}")
    if receipt.message_sha256 is not None and stated.sha256 != receipt.message_sha256:
        raise AccessDenied(f"the message differs from the one intake published for version {version}")
    return receipt


def attributed(stated: Stated | None, work_item: WorkItemRecord | None) -> bool:
    """Whether the message is the one intake published for a version of ``work_item``: only such a
    message is attributed to it (its dead letter shown to the record's tenant). One whose version is not
    recorded yet is not: nothing proves it."""
    if stated is None:
        return False
    try:
        return verify(stated, work_item) is not None
    except AccessDenied:
        return False


def stated_by(message: InboundMessage) -> Stated | None:
    """What a received message states about itself (None: its body is no envelope v1, so it names no
    work item at all). Parsed for attribution only: the envelope is never returned or logged."""
    try:
        envelope = parse_envelope(message.body)
    except MessageRejected:
        return None
    return Stated(envelope, message.session_id, message.application_properties)
