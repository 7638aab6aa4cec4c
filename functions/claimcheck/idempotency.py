"""Idempotency ledger: at most one effect per (work item, version, purpose, effect).

Layout after Powertools' idempotency utility: the logic (key derivation, in-progress expiry,
completed-record replay) lives here; the table adapter only does conditional insert/replace/delete.

Protocol: ``begin`` inserts an in-progress record (conditional insert, so of two concurrent
consumers exactly one wins). The winner performs the effect and calls ``complete`` (the stored
result is replayed to any later delivery).

The in-progress record is a *lease*: it expires ``lease`` after it was last renewed, and the live
attempt renews it every third of a lease (``ClaimHeartbeat``). So a crashed attempt's claim ends
within one lease (seconds), not after the longest processing time we could imagine; the next
delivery waits for that moment in-process (``EffectInProgress.holder_expires_at``) instead of
spending its delivery count, then takes the record over with an ETag-conditional replace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from claimcheck.errors import (
    ClaimCheckError,
    ConcurrencyConflict,
    EffectInProgress,
    RecordExists,
    RecordNotFound,
)
from claimcheck.resilience import claim_wait_delay
from claimcheck.storage import EntityTable, Key

log = logging.getLogger(__name__)

_ROW = "effect"
IN_PROGRESS = "in_progress"
COMPLETED = "completed"
# The consumer's one effect per delivery: the analysis result (its row and its event).
RESULT_EFFECT = "analysis-result"


def _key(key: str) -> Key:
    return Key(key, _ROW)


def idempotency_key(work_item_id: str, version: int, purpose: str, effect: str) -> str:
    return hashlib.sha256(f"{work_item_id}\x1f{version}\x1f{purpose}\x1f{effect}".encode()).hexdigest()


def result_effect_key(work_item_id: str, version: int, purpose: str) -> str:
    """The key of the consumer's effect on one version of a work item for one purpose."""
    return idempotency_key(work_item_id, version, purpose, RESULT_EFFECT)


@dataclass(frozen=True)
class Claimed:
    """This attempt owns the effect; it must ``complete`` or ``release`` it."""

    key: str
    etag: str


@dataclass(frozen=True)
class AlreadyDone:
    """An earlier attempt completed the effect; here is what it recorded."""

    key: str
    result: Mapping[str, Any]


@dataclass(frozen=True)
class Unfinished:
    """A claim whose completion was never recorded: in progress (``etag`` of the row as read) or
    absent (``etag`` None). Completed only by ``complete_unfinished``, when another write proves the
    effect done."""

    key: str
    etag: str | None


class IdempotencyLedger:
    def __init__(self, table: EntityTable, *, lease: timedelta) -> None:
        self._table = table
        self._lease = lease

    @property
    def lease(self) -> timedelta:
        return self._lease

    def begin(self, key: str, *, now: datetime) -> Claimed | AlreadyDone:
        """Claim the effect, or learn it is done; raise ``EffectInProgress`` if someone holds it."""
        entity = {"status": IN_PROGRESS, "expires_at": now + self._lease, "result": ""}
        try:
            return Claimed(key, self._table.insert_if_absent(_key(key), entity))
        except RecordExists:
            pass
        stored = self._table.get(_key(key))
        if stored is None:  # released between our insert and our read: the next delivery claims it
            raise EffectInProgress("the effect record changed under us; retry")
        if stored.values["status"] == COMPLETED:
            return AlreadyDone(key, json.loads(stored.values["result"]))
        if stored.values["expires_at"] > now:
            raise EffectInProgress("another attempt holds this effect", stored.values["expires_at"])
        try:  # the holder crashed: take over its expired record, unless someone else just did
            return Claimed(key, self._table.replace_if_match(_key(key), entity, stored.etag))
        except ConcurrencyConflict as exc:
            raise EffectInProgress("another attempt took over this effect first") from exc

    def renew(self, claim: Claimed, *, now: datetime) -> Claimed:
        """Extend this attempt's lease; raises ``ConcurrencyConflict`` if someone took the claim over."""
        entity = {"status": IN_PROGRESS, "expires_at": now + self._lease, "result": ""}
        return Claimed(claim.key, self._table.replace_if_match(_key(claim.key), entity, claim.etag))

    def lookup(self, key: str) -> AlreadyDone | None:
        """The completed record of ``key``, if the effect is done (a read; claims nothing)."""
        settled = self.settlement_of(key)
        return settled if isinstance(settled, AlreadyDone) else None

    def settlement_of(self, key: str) -> AlreadyDone | Unfinished:
        """The claim of ``key`` as stored: completed (its result), or not (a read; claims nothing)."""
        stored = self._table.get(_key(key))
        if stored is None:
            return Unfinished(key, None)
        if stored.values["status"] == COMPLETED:
            return AlreadyDone(key, json.loads(stored.values["result"]))
        return Unfinished(key, stored.etag)

    def complete_unfinished(self, claim: Unfinished, result: Mapping[str, Any], *, now: datetime) -> None:
        """Record as done an effect that another settlement write proves done (the record
        ``processed``, the work item ``completed``) although the attempt that made it lost its claim's
        completion. Conditional on the row as ``settlement_of`` read it: a row changed since (another
        repair, or a live attempt's completion) is read again and must be completed, else
        ``ConcurrencyConflict`` (the next delivery or run repairs again). A live attempt that still
        holds the claim fails its own completion's ETag check: its effect's writes found their rows,
        and its redelivery is a duplicate."""
        entity = {"status": COMPLETED, "expires_at": now, "result": json.dumps(result, sort_keys=True)}
        try:
            if claim.etag is None:
                self._table.insert_if_absent(_key(claim.key), entity)
            else:
                self._table.replace_if_match(_key(claim.key), entity, claim.etag)
        except (RecordExists, ConcurrencyConflict, RecordNotFound) as lost:
            if self.lookup(claim.key) is None:
                raise ConcurrencyConflict("the effect's claim changed under its repair; retry") from lost

    def complete(self, claim: Claimed, result: Mapping[str, Any], *, now: datetime) -> None:
        """Record the effect as done with its result; raises ``ConcurrencyConflict`` if we lost it."""
        entity = {"status": COMPLETED, "expires_at": now, "result": json.dumps(result, sort_keys=True)}
        self._table.replace_if_match(_key(claim.key), entity, claim.etag)

    def claim_waiting(
        self,
        key: str,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        budget: timedelta,
    ) -> Claimed | AlreadyDone:
        """Claim the effect; while another attempt holds it, wait in-process for its lease to end.

        A redelivery after a crash finds the dead attempt's claim: answering Retry would spend a
        delivery per backoff step and dead-letter the message before the lease ends. Waiting here
        costs no delivery (the host keeps renewing the message and session locks meanwhile); a live
        holder renews its lease and is waited for until it completes (then AlreadyDone) or until
        ``budget`` is spent (then ``EffectInProgress``, the holder still working).
        """
        waited = timedelta(0)
        while True:
            try:
                return self.begin(key, now=clock())
            except EffectInProgress as held:
                delay = claim_wait_delay(clock(), held.holder_expires_at, waited=waited, budget=budget)
                if delay is None:
                    raise
                if waited == timedelta(0):
                    log.info("effect %s is held by another attempt; waiting for its lease", key[:12])
                sleep(delay.total_seconds())
                waited += delay

    def release_or_let_expire(self, claim: Claimed) -> None:
        """``release``; if storage is down, the lease ends by itself within one lease time."""
        try:
            self.release(claim)
        except ClaimCheckError as exc:  # storage failed: the lease ends by itself
            log.warning("could not release claim %s (%s); its lease ends", claim.key[:12], type(exc).__name__)

    def release(self, claim: Claimed) -> None:
        """Give the effect up (this attempt failed) so the next delivery can claim it at once."""
        # A conflict means someone took it over after our record expired: it is theirs now.
        with contextlib.suppress(ConcurrencyConflict):
            self._table.delete_if_match(_key(claim.key), claim.etag)


class ClaimHeartbeat:
    """Renews a claim's lease in a background thread while its attempt works.

    ``stop()`` ends the renewals and answers the claim as last renewed (its ETag is what ``complete``
    and ``release`` must present). A renewal that fails because storage is unreachable is tried again
    at the next beat (the lease still runs for two more beats); one that finds the claim taken over
    stops the beats: ``complete`` will then fail its ETag check, so the effect is recorded only once.
    """

    def __init__(
        self,
        ledger: IdempotencyLedger,
        claim: Claimed,
        *,
        clock: Callable[[], datetime],
        interval: timedelta | None = None,
    ) -> None:
        self._ledger = ledger
        self._claim = claim
        self._clock = clock
        self._interval = (interval or ledger.lease / 3).total_seconds()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._beat, name=f"claim-{claim.key[:8]}", daemon=True)
        self.renewals = 0

    def start(self) -> ClaimHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> Claimed:
        self._stopped.set()
        self._thread.join()
        with self._lock:
            return self._claim

    def _beat(self) -> None:
        failing = False
        while not self._stopped.wait(self._interval):
            with self._lock:
                if self._stopped.is_set():
                    return
                try:
                    self._claim = self._ledger.renew(self._claim, now=self._clock())
                    self.renewals += 1
                except ConcurrencyConflict:
                    log.warning(
                        "claim %s was taken over; this attempt will not record its effect",
                        self._claim.key[:12],
                    )
                    return
                except ClaimCheckError as exc:  # storage failed: the lease still runs; try next beat
                    if not failing:
                        log.warning(
                            "claim %s: lease renewal failed (%s); retrying each beat",
                            self._claim.key[:12],
                            type(exc).__name__,
                        )
                    failing = True
                    continue
                if failing:
                    log.info("claim %s: lease renewed again", self._claim.key[:12])
                    failing = False
