"""What the consumer answers for one delivery, the closed set of dead-letter reasons, and backoff."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
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


def _nothing_after_settlement() -> None:
    """The step of a completion that leaves nothing to clean up."""


@dataclass(frozen=True)
class Complete:
    """Settle the message as completed (the effect exists, or already existed), THEN run
    ``after_settlement``: the cleanup per policy, which may delete the object (docs/architecture.md §9:
    never before the message is completed). The consumer cannot complete a message itself, so the step
    travels with its answer and whoever settles runs it once the completion succeeded, and never when it
    failed (the record then stays ``processed``: a redelivery, a duplicate, or the reconciler after its
    interrupted-cleanup grace finishes it). The step never raises: a failing cleanup is logged and
    left to the reconciler.

    A field of the answer rather than a second entry point: the outcome already says what to settle,
    so what follows the settlement goes with it, and nothing can settle a ``Complete`` without seeing
    it. Not compared, so ``outcome == Complete()`` still asks only "complete?".
    """

    after_settlement: Callable[[], None] = field(default=_nothing_after_settlement, compare=False, repr=False)


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
