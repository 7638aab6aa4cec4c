"""What the consumer answers for one delivery, the closed set of dead-letter reasons, and backoff."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum


class DeadLetterReason(StrEnum):
    """Why a message was dead-lettered. Closed set; the value is what lands in ``DeadLetterReason``.

    - ``invalid_envelope``: body is not a valid envelope v1 (the description names the field).
    - ``unsupported_schema_version``: envelope major schema version this consumer does not know.
    - ``expired``: the envelope's ``expires_at`` has passed; the read grant is over.
    - ``access_denied``: the reference does not resolve for this work item, tenant, purpose,
      environment and version, or policy forbids the read (an unknown reference and another
      tenant's look the same).
    - ``payload_missing``: the registered object is gone, or the producer never finished.
    - ``integrity_failed``: length, sha256 or ETag of the stored object differ from the record.
    - ``content_type_mismatch``: declared type differs from the record, or is not allowed.
    - ``version_mismatch``: a newer version of the work item was confirmed: this one was superseded.
    - ``processing_failed``: the analyzer cannot process the verified document, or retries ran out.
    """

    INVALID_ENVELOPE = "invalid_envelope"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    EXPIRED = "expired"
    ACCESS_DENIED = "access_denied"
    PAYLOAD_MISSING = "payload_missing"
    INTEGRITY_FAILED = "integrity_failed"
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"
    VERSION_MISMATCH = "version_mismatch"
    PROCESSING_FAILED = "processing_failed"


@dataclass(frozen=True)
class Complete:
    """Settle the message as completed (the effect exists, or already existed)."""


@dataclass(frozen=True)
class Retry:
    """Abandon the message so that it is redelivered after ``delay``."""

    reason: str
    delay: timedelta


@dataclass(frozen=True)
class DeadLetter:
    """Dead-letter the message now; ``description`` explains it without payload bytes."""

    reason: DeadLetterReason
    description: str


Outcome = Complete | Retry | DeadLetter


def compute_backoff(
    attempt: int,
    *,
    base: timedelta = timedelta(seconds=1),
    factor: float = 2.0,
    jitter: bool = True,
    max_backoff: timedelta = timedelta(minutes=5),
) -> timedelta:
    """Delay before retry number ``attempt`` (1-based): ``base * factor**(attempt-1)``, capped.

    With ``jitter`` the delay is drawn uniformly from [delay/2, delay] ("equal jitter"), so retries of
    many consumers spread out while the wait still grows with each attempt.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    ceiling = max_backoff.total_seconds()
    # Cap the exponent first so huge attempt numbers cannot overflow the float.
    seconds = min(ceiling, base.total_seconds() * factor ** min(attempt - 1, 64))
    if jitter:
        seconds = random.uniform(seconds / 2, seconds)
    return timedelta(seconds=seconds)
