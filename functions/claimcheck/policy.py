"""Pure policy: classifications, the per-purpose rules table, intake limits and read authorization.

Nothing here performs I/O; the producer and consumer feed it facts and act on its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from claimcheck.errors import (
    EmptyPayload,
    ForbiddenContentType,
    InvalidClassification,
    MissingTenant,
    PayloadTooLarge,
    UnknownPurpose,
)
from claimcheck.settings import EVIDENCE_PURPOSE
from claimcheck.states import PayloadState


class Classification(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"

    @property
    def sensitive(self) -> bool:
        """Sensitive classes always travel by reference, never inline in a message."""
        return self in (Classification.CONFIDENTIAL, Classification.RESTRICTED)


class CleanupPolicy(StrEnum):
    """What happens to the stored object once its effect is confirmed."""

    SYNC = "sync"  # delete right after the message is completed
    ASYNC = "async"  # mark cleanup_pending; the reconciler's sweep deletes it
    RETAIN = "retain"  # keep the object per retention; only the read grant ends


@dataclass(frozen=True)
class PurposePolicy:
    """The rules of one purpose: which types it accepts, which classes, and how it cleans up."""

    name: str
    content_types: frozenset[str]
    classifications: frozenset[Classification]
    cleanup: CleanupPolicy
    readers: frozenset[str] = frozenset({"claimcheck-consumer"})  # service identities that may read
    grant_lifetime: timedelta = timedelta(hours=24)
    retention: timedelta = timedelta(days=30)


DEFAULT_PURPOSES: Mapping[str, PurposePolicy] = {
    policy.name: policy
    for policy in (
        PurposePolicy(
            name="contract-review",
            content_types=frozenset({"text/plain", "application/pdf"}),
            classifications=frozenset(Classification),
            cleanup=CleanupPolicy.SYNC,
        ),
        PurposePolicy(
            name=EVIDENCE_PURPOSE,
            content_types=frozenset({"text/plain", "application/pdf"}),
            classifications=frozenset(Classification),
            cleanup=CleanupPolicy.RETAIN,
        ),
        PurposePolicy(
            name="bulk-ingest",
            content_types=frozenset({"text/plain", "application/octet-stream"}),
            classifications=frozenset({Classification.PUBLIC, Classification.INTERNAL}),
            cleanup=CleanupPolicy.ASYNC,
        ),
    )
}


def base_content_type(declared: str) -> str:
    """``text/plain; charset=utf-8`` → ``text/plain`` (parameters do not change the policy)."""
    return declared.split(";", 1)[0].strip().lower()


def check_intake(
    purposes: Mapping[str, PurposePolicy],
    *,
    tenant_id: str,
    purpose: str,
    classification: str,
    content_type: str,
    declared_length: int | None,
    max_payload_bytes: int,
) -> tuple[PurposePolicy, Classification]:
    """Validate what is known before any byte is stored; raise the matching ``IntakeRejected``."""
    if not tenant_id.strip():
        raise MissingTenant("tenant_id is required")
    policy = purposes.get(purpose)
    if policy is None:
        raise UnknownPurpose(f"purpose {purpose!r} is not one of {sorted(purposes)}")
    try:
        level = Classification(classification)
    except ValueError:
        raise InvalidClassification(
            f"classification {classification!r} is not one of {[c.value for c in Classification]}"
        ) from None
    if level not in policy.classifications:
        raise InvalidClassification(f"purpose {purpose!r} does not accept classification {level.value!r}")
    if base_content_type(content_type) not in policy.content_types:
        raise ForbiddenContentType(
            f"content type {base_content_type(content_type)!r} is not allowed for purpose {purpose!r}; "
            f"allowed: {sorted(policy.content_types)}"
        )
    if declared_length is not None:
        check_length(declared_length, max_payload_bytes)
    return policy, level


def check_length(length: int, max_payload_bytes: int) -> None:
    if length <= 0:
        raise EmptyPayload("the payload is empty")
    if length > max_payload_bytes:
        raise PayloadTooLarge(f"the payload exceeds the limit of {max_payload_bytes} bytes")


def travels_inline(level: Classification, length: int, inline_threshold_bytes: int) -> bool:
    """Small, non-sensitive payloads ride inside the message; everything else goes by reference."""
    return not level.sensitive and length <= inline_threshold_bytes


@dataclass(frozen=True)
class ReadRequest:
    """Facts about one read attempt, from the envelope and the consumer's own identity."""

    identity: str
    work_item_id: str
    tenant_id: str
    purpose: str
    environment: str
    classification: str
    version: int
    content_type: str
    expires_at: datetime
    now: datetime


@dataclass(frozen=True)
class RecordFacts:
    """Facts about the stored object, from the trusted registry."""

    work_item_id: str
    tenant_id: str
    purpose: str
    environment: str
    classification: str
    version: int
    content_type: str
    expires_at: datetime
    state: PayloadState


class Verdict(StrEnum):
    ALLOW = "allow"
    UNRESOLVABLE = "unresolvable"  # looks exactly like an unknown reference, on purpose
    EXPIRED = "expired"
    NOT_YET_VISIBLE = "not_yet_visible"
    GONE = "gone"
    BLOCKED = "blocked"
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"


# The one answer to every read that does not resolve (another tenant's, work item's or version's, or
# none at all): a sender cannot tell which from the dead letter's description.
UNRESOLVABLE = "reference does not resolve for this tenant, purpose and environment"

READABLE_STATES = frozenset({PayloadState.REF_PUBLISHED, PayloadState.AVAILABLE})
GONE_STATES = frozenset({PayloadState.MISSING, PayloadState.CLEANUP_PENDING, PayloadState.REMOVED})


def authorize(
    request: ReadRequest, record: RecordFacts | None, purposes: Mapping[str, PurposePolicy]
) -> tuple[Verdict, str]:
    """Decide whether ``request`` may read ``record``; a denial comes with a reason safe to log.

    Work item, tenant, environment, purpose and version mismatches, and a consumer identity the purpose
    does not allow, answer exactly like an unknown reference: the read is bound to the record it was
    registered for, and a caller cannot learn whether another tenant's (or another work item's or
    version's) object exists. Each version has its own reference, so a version that differs from its
    reference's record is a forged or corrupted envelope, never a superseded one (the consumer tells
    superseded versions apart by the work item's confirmed version, not here).
    """
    unresolvable = (Verdict.UNRESOLVABLE, UNRESOLVABLE)
    policy = purposes.get(request.purpose)
    if record is None or policy is None or request.identity not in policy.readers:
        return unresolvable
    if (request.work_item_id, request.tenant_id, request.environment, request.purpose, request.version) != (
        record.work_item_id,
        record.tenant_id,
        record.environment,
        record.purpose,
        record.version,
    ):
        return unresolvable
    if request.now >= request.expires_at or request.now >= record.expires_at:
        return Verdict.EXPIRED, "the read grant for this reference has expired"
    if request.classification != record.classification:
        return Verdict.BLOCKED, "envelope classification differs from the registered classification"
    if Classification(record.classification) not in policy.classifications:
        return Verdict.BLOCKED, "policy does not allow this classification for this purpose"
    if base_content_type(request.content_type) != base_content_type(record.content_type):
        return Verdict.CONTENT_TYPE_MISMATCH, "declared content type differs from the registered one"
    if base_content_type(record.content_type) not in policy.content_types:
        return Verdict.CONTENT_TYPE_MISMATCH, "registered content type is not allowed for this purpose"
    if record.state is PayloadState.PREPARING:
        return Verdict.NOT_YET_VISIBLE, "the producer has not confirmed the publish of this version yet"
    if record.state in GONE_STATES:
        return Verdict.GONE, f"the object is {record.state.value}"
    if record.state not in READABLE_STATES:
        return Verdict.BLOCKED, f"the object is in state {record.state.value} and cannot be read"
    return Verdict.ALLOW, "allowed"
