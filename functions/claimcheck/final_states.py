"""The read-after-write answer of the status API (docs/architecture.md §8), as one pure function.

An agent that wrote version N asks ``GET /api/work-items/{id}?min_version=N`` and gets a ``visibility``
state with a machine-readable ``next_action``:

=====================  ===========  ==========================================================
visibility             next_action  when
=====================  ===========  ==========================================================
version_confirmed      proceed      version ≥ N is visible and its processing is finished
version_confirmed      wait         version ≥ N is visible, its result is still being computed
awaiting_visibility    wait         N was reserved by an intake and its deadline has not passed
awaiting_visibility    re_read      a non-authoritative read (a cache) shows less than N, or no N asked
propagation_exceeded   reconcile    N was reserved but is still not visible after the deadline
conflict_detected      re_read      a newer version with other content replaced N
needs_reconciliation   reconcile    the visible version failed, expired or lost its object
unknown_version        stop         N was never reserved (HTTP 404): it was never accepted
=====================  ===========  ==========================================================

``wait`` comes with ``retry_after`` seconds (also sent as ``Retry-After``).

A record read from a cache or replica (``authoritative=False``) may be older than the table. Versions
only grow, so it still proves "version ≥ N is visible"; it never proves which version is the latest,
that N is unknown, or that N is late — for those the answer is ``awaiting_visibility`` / ``re_read``,
so an old version is never confirmed as current.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from claimcheck.receipts import WriteReceipt

AWAITING_VISIBILITY = "awaiting_visibility"
VERSION_CONFIRMED = "version_confirmed"
PROPAGATION_EXCEEDED = "propagation_exceeded"
CONFLICT_DETECTED = "conflict_detected"
NEEDS_RECONCILIATION = "needs_reconciliation"
UNKNOWN_VERSION = "unknown_version"

WAIT, PROCEED, STOP, RECONCILE, RE_READ = "wait", "proceed", "stop", "reconcile", "re_read"

# How soon to ask again while a result is being computed (the consumer takes seconds per document).
PROCESSING_RETRY_AFTER = 2
# Processing states after which nothing more happens to a version without an operator.
_BROKEN_STATES = frozenset({"failed", "expired"})
_BROKEN_PAYLOADS = frozenset({"missing", "integrity_failed", "access_denied"})


@dataclass(frozen=True)
class VersionFacts:
    """What the authoritative work-item row says, reduced to what the decision needs."""

    confirmed_version: int  # 0: nothing visible yet
    pending_version: int  # highest reserved version (≥ confirmed)
    reserved_at: datetime | None  # when pending_version was reserved
    processing_state: str | None  # accepted | running | completed | failed | expired
    payload_state: str | None
    receipts: Sequence[WriteReceipt] = ()
    authoritative: bool = True  # False: read through a cache/replica that may be behind the table


@dataclass(frozen=True)
class FinalAnswer:
    visibility: str
    next_action: str
    retry_after: int | None = None

    @property
    def http_status(self) -> int:
        return 404 if self.visibility == UNKNOWN_VERSION else 200

    def to_dict(self) -> dict[str, Any]:
        return {
            "visibility": self.visibility,
            "next_action": self.next_action,
            "retry_after": self.retry_after,
        }


def decide(
    facts: VersionFacts | None, min_version: int | None, *, now: datetime, window: timedelta
) -> FinalAnswer:
    """The state and next action for a read of "at least ``min_version``" (None: the latest)."""
    confirmed = 0 if facts is None else facts.confirmed_version
    wanted = 1 if min_version is None else max(min_version, 1)
    if facts is not None and not facts.authoritative and (min_version is None or confirmed < wanted):
        return FinalAnswer(AWAITING_VISIBILITY, RE_READ)
    if facts is None or confirmed < wanted:
        if facts is None or facts.pending_version < wanted or facts.reserved_at is None:
            return FinalAnswer(UNKNOWN_VERSION, STOP)
        remaining = (facts.reserved_at + window - now).total_seconds()
        if remaining > 0:
            return FinalAnswer(AWAITING_VISIBILITY, WAIT, max(1, min(math.ceil(remaining), 5)))
        return FinalAnswer(PROPAGATION_EXCEEDED, RECONCILE)
    # Only a version that was asked for can have been replaced: min_version 0 ("at least 0") names none.
    if (
        min_version is not None
        and min_version >= 1
        and confirmed > min_version
        and _replaced(facts.receipts, min_version)
    ):
        return FinalAnswer(CONFLICT_DETECTED, RE_READ)
    if facts.processing_state in _BROKEN_STATES or facts.payload_state in _BROKEN_PAYLOADS:
        return FinalAnswer(NEEDS_RECONCILIATION, RECONCILE)
    if facts.processing_state == "completed":
        return FinalAnswer(VERSION_CONFIRMED, PROCEED)
    return FinalAnswer(VERSION_CONFIRMED, WAIT, PROCESSING_RETRY_AFTER)


def _replaced(receipts: Sequence[WriteReceipt], version: int) -> bool:
    """True unless the latest version carries the same content as ``version`` (a same-content resend
    is no conflict). A version no longer among the kept receipts counts as replaced."""
    if not receipts:
        return True
    wanted = [receipt for receipt in receipts if receipt.version == version]
    return not wanted or wanted[-1].sha256 != receipts[-1].sha256
