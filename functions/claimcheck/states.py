"""State machines as explicit tables of allowed moves. Anything not listed raises.

Payload (stored object) states, in intake order:

- preparing → available (publish confirmed; the producer activates the object in the same step) →
  processed (effect done: the consumer's move, whatever the cleanup policy);
- preparing → ref_published (publish confirmed, activation unfinished: what reconciliation records when
  it finds a confirmed version's record still preparing) → available (activated by reconciliation);
- preparing → removed (orphan: publish never confirmed, grace period over);
- ref_published / available → missing | integrity_failed | access_denied (kept for investigation);
- processed → removed (sync cleanup, once the message is completed, straight after its delete) |
  cleanup_pending (async cleanup once the message is completed; the reconciler's removals) → removed
  (the sweep) | missing (retained object gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from claimcheck.errors import IllegalTransition


class PayloadState(StrEnum):
    PREPARING = "preparing"  # object written (provisional), registry recorded, publish not confirmed
    REF_PUBLISHED = "ref_published"  # publish confirmed, activation pending
    AVAILABLE = "available"  # activated: readable by an authorized consumer
    ACCESS_DENIED = "access_denied"  # the owner's policy blocks reads (kept for investigation)
    INTEGRITY_FAILED = "integrity_failed"  # stored bytes differ from the record (kept for investigation)
    MISSING = "missing"  # registered object is gone
    PROCESSED = "processed"  # the effect is confirmed
    CLEANUP_PENDING = "cleanup_pending"  # effect confirmed; the object is being (sync) or will be deleted
    REMOVED = "removed"  # object deleted, proof written


_READ_FAILURES = (PayloadState.ACCESS_DENIED, PayloadState.INTEGRITY_FAILED, PayloadState.MISSING)

PAYLOAD_MOVES: Mapping[PayloadState, frozenset[PayloadState]] = {
    PayloadState.PREPARING: frozenset(
        {PayloadState.AVAILABLE, PayloadState.REF_PUBLISHED, PayloadState.REMOVED}
    ),
    PayloadState.REF_PUBLISHED: frozenset(
        {PayloadState.AVAILABLE, PayloadState.PROCESSED, PayloadState.CLEANUP_PENDING, *_READ_FAILURES}
    ),
    PayloadState.AVAILABLE: frozenset(
        {PayloadState.PROCESSED, PayloadState.CLEANUP_PENDING, *_READ_FAILURES}
    ),
    PayloadState.ACCESS_DENIED: frozenset(),
    PayloadState.INTEGRITY_FAILED: frozenset(),
    PayloadState.MISSING: frozenset(),
    PayloadState.PROCESSED: frozenset(
        {PayloadState.CLEANUP_PENDING, PayloadState.REMOVED, PayloadState.MISSING}
    ),
    PayloadState.CLEANUP_PENDING: frozenset({PayloadState.REMOVED}),
    PayloadState.REMOVED: frozenset(),
}


class WorkItemState(StrEnum):
    ACCEPTED = "accepted"  # a version was confirmed and published
    RUNNING = "running"  # a consumer holds it
    COMPLETED = "completed"  # the result exists
    FAILED = "failed"  # dead-lettered; see the reason
    EXPIRED = "expired"  # the grant ran out before processing


WORK_ITEM_MOVES: Mapping[WorkItemState, frozenset[WorkItemState]] = {
    # A new version re-opens any work item; within one version the moves go forward only.
    WorkItemState.ACCEPTED: frozenset(
        {WorkItemState.ACCEPTED, WorkItemState.RUNNING, WorkItemState.FAILED, WorkItemState.EXPIRED}
    ),
    WorkItemState.RUNNING: frozenset(
        {
            WorkItemState.ACCEPTED,
            WorkItemState.RUNNING,
            WorkItemState.COMPLETED,
            WorkItemState.FAILED,
            WorkItemState.EXPIRED,
        }
    ),
    WorkItemState.COMPLETED: frozenset({WorkItemState.ACCEPTED}),
    # A dead-lettered message replayed by an operator runs again.
    WorkItemState.FAILED: frozenset({WorkItemState.ACCEPTED, WorkItemState.RUNNING}),
    WorkItemState.EXPIRED: frozenset({WorkItemState.ACCEPTED}),
}


def check_payload_move(current: PayloadState, target: PayloadState) -> None:
    """Raise ``IllegalTransition`` unless ``current → target`` is in ``PAYLOAD_MOVES``."""
    if target not in PAYLOAD_MOVES[current]:
        raise IllegalTransition(f"payload state {current.value} → {target.value} is not allowed")


def may_move(current: WorkItemState, target: WorkItemState) -> bool:
    """Whether ``WORK_ITEM_MOVES`` allows ``current → target`` (staying put counts as allowed)."""
    return current is target or target in WORK_ITEM_MOVES[current]


def check_work_item_move(current: WorkItemState, target: WorkItemState) -> None:
    """Raise ``IllegalTransition`` unless ``current → target`` is in ``WORK_ITEM_MOVES``."""
    if target not in WORK_ITEM_MOVES[current]:
        raise IllegalTransition(f"work item state {current.value} → {target.value} is not allowed")
