"""The one error tree of the claim-check core.

Three branches, each leaf with one meaning:
- ``IntakeRejected`` leaves: bad input at intake; each maps to one ``code`` and one HTTP status.
- ``MessageRejected`` leaves: a delivery that can never succeed; each maps to one ``DeadLetterReason``.
- ``RetryableError`` leaves: the delivery may succeed later; the consumer answers ``Retry``.
``StoreError`` leaves report a refused state move or a lost optimistic-concurrency race: they always
raise, so an illegal move or a lost race never passes silently.
``StorageUnavailable``/``StorageFailed`` and ``BrokerUnavailable``/``BrokerFailed`` are what the
storage and Service Bus adapters make of an SDK error they give no other meaning (adapters/sdk_errors.py).
``PayloadStoreError`` leaves are what the payload store (and the integrity checks it runs) says about an
object, in storage terms (not found, exists, changed, mismatch of one field, too large, empty). They mean
nothing to a caller by themselves: the producer answers them through one table (``producer.py``,
an ``IntakeRejected`` leaf, i.e. an HTTP status) and the consumer through another
(``consumer_outcomes.py``, a ``MessageRejected`` leaf, i.e. a dead-letter reason). Adapters raise them
``from`` the SDK's exception.

Messages name fields and reasons, never payload bytes, URLs or credentials.
"""

from __future__ import annotations

from datetime import datetime

from claimcheck.outcome import DeadLetterReason


class ClaimCheckError(Exception):
    """Root of every error the claim-check core raises on purpose."""


# --- intake -------------------------------------------------------------------------------------------


class IntakeRejected(ClaimCheckError):
    """Bad input at intake: nothing was stored or published. ``str()`` is the reason for the caller."""

    code = "invalid_request"
    http_status = 400

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MissingTenant(IntakeRejected):
    code = "missing_tenant"


class UnknownPurpose(IntakeRejected):
    code = "unknown_purpose"


class InvalidClassification(IntakeRejected):
    code = "invalid_classification"


class EmptyPayload(IntakeRejected):
    code = "empty_payload"


class PayloadTooLarge(IntakeRejected):
    code = "payload_too_large"
    http_status = 413


class UseDirectUpload(IntakeRejected):
    """A request body above ``POST /documents``' inline cap (``Settings.max_inline_request_bytes``),
    refused before it is read: a document that large comes through the direct upload (claimcheck.uploads)."""

    code = "use_direct_upload"
    http_status = 413


class ForbiddenContentType(IntakeRejected):
    code = "forbidden_content_type"
    http_status = 415


class WorkItemConflict(IntakeRejected):
    """The work item id belongs to another tenant, or a concurrent submission won the next version."""

    code = "work_item_conflict"
    http_status = 409


class ConflictDetected(IntakeRejected):
    """A conditional write's ``If-Match`` names a version that is not the work item's current one, or
    another write of the next version is in flight: nothing was written (docs/architecture.md §8, re-read
    first)."""

    code = "conflict_detected"
    http_status = 412

    def __init__(self, reason: str, *, current_version: int) -> None:
        super().__init__(reason)
        self.current_version = current_version


class PreconditionRequired(IntakeRejected):
    """A new version of an existing work item sent without ``If-Match``: unconditional overwrites are
    refused, so a retry after a timeout can never silently become version N+1."""

    code = "precondition_required"
    http_status = 428

    def __init__(self, reason: str, *, current_version: int) -> None:
        super().__init__(reason)
        self.current_version = current_version


class IdempotencyKeyReused(IntakeRejected):
    """The ``Idempotency-Key`` was already used by this caller for other content or metadata."""

    code = "idempotency_key_reused"
    http_status = 409


class RequestInProgress(IntakeRejected):
    """The first request with this ``Idempotency-Key`` is still running; ask again shortly."""

    code = "request_in_progress"
    http_status = 409
    retry_after = 1.0


class PublishNotConfirmed(IntakeRejected):
    """The broker did not confirm the publish (or is known to be down); nothing was activated,
    reconciliation cleans up. ``retry_after`` is the seconds a caller should wait (Retry-After)."""

    code = "publish_not_confirmed"
    http_status = 503

    def __init__(self, reason: str, *, retry_after: float = 1.0) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


# --- consumer: permanent ----------------------------------------------------------------------------


class MessageRejected(ClaimCheckError):
    """The delivery can never succeed as sent; it is dead-lettered with ``reason``."""

    reason: DeadLetterReason = DeadLetterReason.PROCESSING_FAILED


class InvalidEnvelope(MessageRejected):
    """The body is not a valid envelope; ``field`` names the first offending field."""

    reason = DeadLetterReason.INVALID_ENVELOPE

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"envelope field {field!r}: {problem}")
        self.field = field


class UnsupportedSchemaVersion(MessageRejected):
    reason = DeadLetterReason.UNSUPPORTED_SCHEMA_VERSION


class EnvelopeExpired(MessageRejected):
    reason = DeadLetterReason.EXPIRED


class AccessDenied(MessageRejected):
    reason = DeadLetterReason.ACCESS_DENIED


class PayloadMissing(MessageRejected):
    reason = DeadLetterReason.PAYLOAD_MISSING


class IntegrityFailed(MessageRejected):
    reason = DeadLetterReason.INTEGRITY_FAILED


class ContentTypeMismatch(MessageRejected):
    reason = DeadLetterReason.CONTENT_TYPE_MISMATCH


class VersionMismatch(MessageRejected):
    reason = DeadLetterReason.VERSION_MISMATCH


class ProcessingFailed(MessageRejected):
    reason = DeadLetterReason.PROCESSING_FAILED


# --- consumer: transient ----------------------------------------------------------------------------


class RetryableError(ClaimCheckError):
    """The delivery may succeed later; retried with backoff, bounded by the delivery count.

    ``gives_up_as`` is the dead-letter reason once the last allowed delivery still fails.
    """

    gives_up_as: DeadLetterReason = DeadLetterReason.PROCESSING_FAILED


class NotYetVisible(RetryableError):
    """The producer has not confirmed this version yet (publish raced ahead of activation)."""

    gives_up_as = DeadLetterReason.PAYLOAD_MISSING


class EffectInProgress(RetryableError):
    """Another attempt holds the in-progress idempotency record for this effect.

    ``holder_expires_at`` is when the holder's lease ends unless it renews it (None when unknown).
    """

    def __init__(self, reason: str, holder_expires_at: datetime | None = None) -> None:
        super().__init__(reason)
        self.holder_expires_at = holder_expires_at


# --- stores -------------------------------------------------------------------------------------------


class StoreError(ClaimCheckError):
    """A registry, ledger or work-item store refused an operation."""


class IllegalTransition(StoreError):
    """A state move that the table of allowed moves does not list."""


class ConcurrencyConflict(StoreError):
    """An ETag-conditional write lost a race: someone else changed the record first."""


class RecordExists(StoreError):
    """A conditional insert found the key already taken."""


class RecordNotFound(StoreError):
    """A point read or conditional update found no record under the key."""


# --- storage service ----------------------------------------------------------------------------------


class StorageUnavailable(ClaimCheckError):
    """Storage did not answer (refused, timed out, connection broken): an outage, retried with backoff.
    The SDK's exception is the ``__cause__``; the message names its type, never its text."""


class StorageFailed(ClaimCheckError):
    """Storage answered with an error the core gives no meaning to (authorization, throttling, a server
    error); the SDK's exception is the ``__cause__``."""


# --- message broker ---------------------------------------------------------------------------------


class BrokerUnavailable(ClaimCheckError):
    """The message broker (or its management plane) did not answer: an outage, retried with backoff.
    The SDK's exception is the ``__cause__``; the message names its type, never its text."""


class BrokerFailed(ClaimCheckError):
    """The broker answered with an error the core gives no meaning to (authorization, quota, an entity
    missing, a message too large); the SDK's exception is the ``__cause__``."""


# --- payload store ------------------------------------------------------------------------------------


class PayloadStoreError(ClaimCheckError):
    """The payload store refused an operation on one object; ``str()`` says why, never its bytes."""


class ObjectNotFound(PayloadStoreError):
    """No object under that reference (classified by the caller)."""


class ObjectExists(PayloadStoreError):
    """Write-once: an object already exists under that reference and is never overwritten."""


class ObjectChanged(PayloadStoreError):
    """The object is not the one recorded: its ETag differs, or it changed while it was being read."""


class ObjectMismatch(PayloadStoreError):
    """The bytes disagree with what was declared or recorded; ``field`` is ``length``, ``sha256`` or
    ``content_type``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


class ObjectTooLarge(PayloadStoreError):
    """More bytes than ``limit`` came through (the transfer stopped there)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the payload exceeds the limit of {limit} bytes")
        self.limit = limit


class ObjectEmpty(PayloadStoreError):
    """An upload without a single byte."""
