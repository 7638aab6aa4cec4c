"""Cleanup tied to settlement, with a proof record for every deletion.

Called only once the effect is durably recorded (result row written, result event published, the
record ``processed``) and the message is completed (the consumer's ``Complete`` carries the cleanup as
its ``after_settlement`` step): never before, and never for a dead-lettered delivery. Sync then deletes
at once, straight from ``processed``; async marks ``cleanup_pending`` for the reconciler's sweep; retain
keeps the object until retention ends. Until the step runs the record is ``processed``:
``cleanup_pending`` (which the sweep deletes at once) is written only by the step, after the completion.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime

from claimcheck.concurrently import both
from claimcheck.errors import ClaimCheckError
from claimcheck.policy import CleanupPolicy, PurposePolicy
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.routing import PayloadStores
from claimcheck.states import PayloadState
from claimcheck.storage import EntityTable, Key, PayloadStore
from claimcheck.timestamps import format_timestamp

log = logging.getLogger(__name__)


class Cleaner:
    def __init__(
        self, stores: PayloadStores, registry: PayloadRegistry, audit: EntityTable, *, identity: str
    ) -> None:
        self._stores = stores
        self._registry = registry
        self._audit = audit
        self._identity = identity

    def after_effect(self, record: PayloadRecord, policy: CleanupPolicy, *, now: datetime) -> PayloadRecord:
        """Apply ``policy`` to an object whose effect is confirmed and whose message is completed: the
        consumer left it ``processed``. Async moves it to ``cleanup_pending`` only now (a crash before
        the completion must never leave a state the reconciler's sweep deletes at once). Sync deletes
        it at once, with no ``cleanup_pending`` write first: that intent would only tell the reconciler
        what the record's ``processed`` state and its purpose's policy already say, and cost a round
        trip before the delete. A crash or a failed delete after the completion leaves the record
        ``processed`` (the object gone or not), which a redelivery finishes, or the reconciler once the
        interrupted-cleanup grace has passed, with a proof that records whether the object still
        existed. ``cleanup_pending`` already (a redelivery finishing a crashed step) goes on."""
        if policy is CleanupPolicy.SYNC:
            return self._delete_and_prove(
                record, why="sync cleanup after the effect was confirmed", now=now, previous=record.state
            )
        if record.state is PayloadState.PROCESSED and policy is CleanupPolicy.ASYNC:
            return self._registry.move(record, PayloadState.CLEANUP_PENDING, now=now)
        return record

    def finish_interrupted(
        self, record: PayloadRecord, purposes: Mapping[str, PurposePolicy], *, now: datetime
    ) -> None:
        """A redelivery of a completed effect whose object is still ``processed`` or (sync policy)
        ``cleanup_pending``: the attempt that settled it crashed, or its completion failed, before its
        cleanup (the consumer runs this once the redelivery itself is completed). Finish it under the
        record's own purpose policy (a retained object stays); a lost race with the reconciler or a
        failing delete is left to it."""
        policy = purposes.get(record.purpose)
        if policy is None:
            return
        if record.state is PayloadState.CLEANUP_PENDING and policy.cleanup is not CleanupPolicy.SYNC:
            return  # an asynchronous cleanup waits for the reconciler's sweep, as intended
        try:
            self.after_effect(record, policy.cleanup, now=now)
        except ClaimCheckError as exc:  # a lost race (StoreError) or storage failing
            log.info("cleanup of %s left to reconciliation (%s)", record.ref, type(exc).__name__)

    def remove(self, record: PayloadRecord, *, why: str, now: datetime) -> PayloadRecord:
        """Delete the object, move the record to ``removed`` (checked moves), and write the proof.

        The reconciler's removals: a processed object passes through ``cleanup_pending`` first, so a
        crash mid-way leaves a state its sweep finishes, and a lost race on the record (the consumer's
        own late cleanup) raises before deleting.
        """
        previous = record.state
        if record.state is PayloadState.PROCESSED:
            record = self._registry.move(record, PayloadState.CLEANUP_PENDING, now=now)
        return self._delete_and_prove(record, why=why, now=now, previous=previous)

    def _delete_and_prove(
        self, record: PayloadRecord, *, why: str, now: datetime, previous: PayloadState
    ) -> PayloadRecord:
        """Delete the object, then move the record to ``removed`` and write the proof (whether the
        object still existed comes from the delete's answer, so both wait for it)."""
        existed = self._stores.for_purpose(record.purpose).delete(record.ref)
        # The record's move and the proof are independent writes (the proof is keyed by ref and a
        # fresh row id): both at once. A crash that leaves the record cleanup_pending is swept again,
        # one that leaves it processed (the consumer's sync cleanup) is finished by the reconciler
        # after the interrupted-cleanup grace (a second proof then says the object was already gone).
        removed, _ = both(
            lambda: self._registry.move(record, PayloadState.REMOVED, now=now),
            lambda: self._prove(
                record.ref,
                why,
                now,
                existed=existed,
                work_item_id=record.work_item_id,
                tenant_id=record.tenant_id,
                version=record.version,
                sha256=record.sha256,
                previous_state=previous.value,
            ),
        )
        log.info(
            "payload removed: ref=%s work_item=%s version=%d at=%s reason=%s",
            record.ref,
            record.work_item_id,
            record.version,
            format_timestamp(now),
            why,
        )
        return removed

    def remove_unregistered(self, ref: str, store: PayloadStore, *, why: str, now: datetime) -> None:
        """Delete a provisional object that has no registry record (crash right after its upload) from
        the store that listed it."""
        existed = store.delete(ref)
        self._prove(
            ref,
            why,
            now,
            existed=existed,
            work_item_id="",
            tenant_id="",
            version=0,
            sha256="",
            previous_state="unregistered",
        )
        log.info("unregistered provisional object removed: ref=%s reason=%s", ref, why)

    def _prove(self, ref: str, why: str, now: datetime, *, existed: bool, **facts: str | int) -> None:
        """The deletion proof: who, when, which object and version, why."""
        self._audit.insert_if_absent(
            Key(ref, uuid.uuid4().hex),
            {
                **facts,
                "object_existed": existed,
                "deleted_by": self._identity,
                "deleted_at": now,
                "reason": why,
            },
        )
