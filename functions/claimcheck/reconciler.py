"""Reconciliation (timer trigger and ops command): find what a crash between two steps left behind.

- provisional objects whose publish was never confirmed (``preparing`` records, or provisional-
  tagged objects with no record at all) → removed after the orphan grace period, with an alert
  that states the consequence;
- ``preparing`` records whose version the work item confirmed with that reference (the producer's
  last step, where the record's move, the tag's activation and the confirmation go at once, lost
  the record's move) → ``ref_published``: the publish was confirmed, activation finishes next;
- ``ref_published`` records (publish confirmed, activation unfinished) → activation finished;
- readable or processed (kept) records whose object is still tagged provisional (that same step lost
  the tag's activation) → activated, so the lifecycle backstop never removes them;
- readable records, and processed ones kept under a retention policy, whose object is gone → flagged
  ``missing``;
- ``cleanup_pending`` records → deleted (the asynchronous cleanup sweep); a failed delete keeps the
  record ``cleanup_pending`` for the next run;
- processed records under a sync or async policy, older than the interrupted-cleanup grace → deleted,
  or (object already gone) moved to ``removed``, with proof either way: a crash or a failed
  completion between ``processed`` and the cleanup, or the sync cleanup (which deletes straight from
  ``processed``) interrupted after its delete; left alone within the grace, gone object or not;
- processed records kept under a retention policy → deleted once retention has elapsed;
- before either removal of a processed record, the settlement writes a crash lost next to its
  ``processed`` (the claim's completion, the work item's ``completed``) are finished from the summary
  already recorded (``settlement_repair``): once the object is gone, a later delivery of that version
  finds the work item completed (or the claim, a newer version confirmed since) and completes as a
  duplicate instead of dead-lettering ``payload_missing``, and the work item never stays ``running``;
- work items whose first version was reserved and never confirmed, past the orphan grace (an intake
  that failed after reserving and could not release it: a storage outage mid-request) → released;
- reconciliation entries of versions past their visibility deadline (raised by the status read,
  ``claimcheck.propagation``) → resolved once the version is confirmed, otherwise counted and alerted;
- dead-lettered messages per entity (count, oldest age) through a ``DeadLetterSource``, when given,
  with an alert line for an entity whose oldest one is older than the configured age.

One record that fails (any exception) never aborts the run: it is counted in ``errors`` and logged by
reference and exception type only (never the exception text, which may quote a URL or content).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from claimcheck.cleanup import Cleaner
from claimcheck.deadletters import DeadLetterSource, dead_letter_alerts
from claimcheck.errors import ClaimCheckError, StoreError
from claimcheck.policy import CleanupPolicy, PurposePolicy
from claimcheck.propagation import PropagationEntries, resolved_by
from claimcheck.receipts import WriteReceipt
from claimcheck.registry import PayloadRecord, PayloadRegistry
from claimcheck.routing import PayloadStores
from claimcheck.settings import Settings
from claimcheck.settlement_repair import SettlementRepair
from claimcheck.states import PayloadState
from claimcheck.storage import PayloadStore
from claimcheck.workitems import WorkItemStore

log = logging.getLogger(__name__)

# Registered states whose object must not keep the provisional tag (the lifecycle backstop matches it).
_KEPT_ACTIVE = frozenset({PayloadState.AVAILABLE, PayloadState.PROCESSED})


@dataclass
class ReconciliationReport:
    orphans_removed: list[str] = field(default_factory=list)
    orphans_waiting: list[str] = field(default_factory=list)
    activations_finished: list[str] = field(default_factory=list)
    flagged_missing: list[str] = field(default_factory=list)
    cleaned_up: list[str] = field(default_factory=list)
    retention_removed: list[str] = field(default_factory=list)
    interrupted_cleanups_finished: list[str] = field(default_factory=list)
    # Processed records whose lost settlement writes (claim, work item) were finished before removal.
    settlements_repaired: list[str] = field(default_factory=list)
    # "<work item> v<version>" of propagation_exceeded entries still open, and resolved in this run.
    propagation_exceeded: list[str] = field(default_factory=list)
    propagation_resolved: list[str] = field(default_factory=list)
    # Work items whose first version was reserved and never confirmed, past the orphan grace: released.
    reservations_released: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # records that changed under us; next run
    errors: list[str] = field(default_factory=list)  # refs whose step failed; retried next run
    # One entry per entity read: {"entity", "count", "oldest_age_seconds" (None when empty)}.
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {name: list(value) for name, value in self.__dict__.items()}


class Reconciler:
    def __init__(
        self,
        *,
        settings: Settings,
        stores: PayloadStores,
        registry: PayloadRegistry,
        work_items: WorkItemStore,
        cleaner: Cleaner,
        settlement_repair: SettlementRepair,
        purposes: Mapping[str, PurposePolicy],
        clock: Callable[[], datetime],
        dead_letters: DeadLetterSource | None = None,
        propagation: PropagationEntries | None = None,
    ) -> None:
        self._stores = stores
        self._settlement_repair = settlement_repair
        self._propagation = propagation
        self._dead_letters = dead_letters
        self._dead_letter_alert_age = timedelta(seconds=settings.dead_letter_alert_age_seconds)
        self._registry = registry
        self._work_items = work_items
        self._cleaner = cleaner
        self._purposes = purposes
        self._clock = clock
        self._orphan_grace = timedelta(seconds=settings.orphan_grace_seconds)
        # Publish is confirmed for ref_published: only a crashed producer leaves one this old.
        self._activation_grace = timedelta(seconds=settings.visibility_grace_seconds)
        self._interrupted_cleanup_grace = timedelta(seconds=settings.interrupted_cleanup_grace_seconds)

    def run(self, now: datetime | None = None) -> ReconciliationReport:
        now = now or self._clock()
        report = ReconciliationReport()
        for record in self._registry.in_states(
            [
                PayloadState.PREPARING,
                PayloadState.REF_PUBLISHED,
                PayloadState.AVAILABLE,
                PayloadState.PROCESSED,
                PayloadState.CLEANUP_PENDING,
            ]
        ):
            try:
                self._reconcile(record, now, report)
            except StoreError as exc:
                report.conflicts.append(record.ref)
                log.info("reconcile %s skipped: %s", record.ref, type(exc).__name__)
            except ClaimCheckError as exc:  # storage failed on this record: the others go on
                report.errors.append(record.ref)
                log.warning("reconcile %s failed (%s); retried next run", record.ref, type(exc).__name__)
        try:
            self._sweep_unregistered(now, report)
        except (
            ClaimCheckError
        ) as exc:  # the listing itself failed; each object's own failure is caught inside
            report.errors.append("provisional-object sweep")
            log.warning("provisional-object sweep failed (%s); retried next run", type(exc).__name__)
        self._release_unconfirmed(now, report)
        self._propagation_entries(now, report)
        self._count_dead_letters(now, report)
        for alert in report.alerts:
            log.warning("ALERT %s", alert)
        # One summary line per run; the orphan-count alert of the stack (infra/components/observability.py)
        # reads it. The counts are in the text too because the Functions Python worker forwards a log
        # record's message but not its `extra` (azure-functions-python-worker #1327, #1681).
        counts = {
            "orphans_found": len(report.orphans_removed) + len(report.orphans_waiting),
            "orphans_removed": len(report.orphans_removed),
            "missing_flagged": len(report.flagged_missing),
            "reservations_released": len(report.reservations_released),
            "cleaned_up": len(report.cleaned_up)
            + len(report.retention_removed)
            + len(report.interrupted_cleanups_finished),
            "interrupted_cleanups_finished": len(report.interrupted_cleanups_finished),
            "settlements_repaired": len(report.settlements_repaired),
            "propagation_exceeded_open": len(report.propagation_exceeded),
            "propagation_resolved": len(report.propagation_resolved),
            "errors": len(report.errors),
            "dead_lettered": sum(entry["count"] for entry in report.dead_letters),
            "oldest_dead_letter_age_s": max(
                (entry["oldest_age_seconds"] or 0 for entry in report.dead_letters), default=0
            ),
        }
        log.info(
            "reconciliation finished %s",
            " ".join(f"{name}={count}" for name, count in counts.items()),
            extra={"custom_dimensions": counts},
        )
        return report

    def _release_unconfirmed(self, now: datetime, report: ReconciliationReport) -> None:
        """Remove work-item rows whose first version was never confirmed, past the orphan grace: an
        intake that failed after reserving (a storage outage mid-request, which also failed the
        producer's own release) left a row nobody confirms; its object and record are orphans removed
        above, and a retry of the request made its own. Conditional on the row as read."""
        try:
            stale = list(self._work_items.unconfirmed_reservations(now - self._orphan_grace))
        except ClaimCheckError as exc:  # the listing itself failed: the run goes on
            report.errors.append("unconfirmed reservations")
            log.warning("unconfirmed reservations unavailable (%s); retried next run", type(exc).__name__)
            return
        for reserved in stale:
            try:
                self._work_items.release_fresh(reserved)
            except StoreError:  # changed since it was read (confirmed, reserved again): not stale
                report.conflicts.append(reserved.work_item_id)
                continue
            except ClaimCheckError as exc:
                report.errors.append(reserved.work_item_id)
                log.warning(
                    "reservation %s not released (%s); retried next run",
                    reserved.work_item_id,
                    type(exc).__name__,
                )
                continue
            report.reservations_released.append(reserved.work_item_id)
            log.warning(
                "ALERT %s: version %d reserved, never confirmed (its intake failed mid-request; no "
                "receipt was given); reservation released",
                reserved.work_item_id,
                reserved.pending_version,
            )

    def _propagation_entries(self, now: datetime, report: ReconciliationReport) -> None:
        if self._propagation is None:
            return
        try:
            entries = list(self._propagation.open_entries())
        except ClaimCheckError as exc:  # the listing itself failed: the run goes on
            report.errors.append("propagation entries")
            log.warning("propagation entries unavailable (%s); retried next run", type(exc).__name__)
            return
        for entry in entries:
            name = f"{entry.work_item_id} v{entry.version}"
            try:
                item = self._work_items.get(entry.work_item_id)
                if resolved_by(entry, None if item is None else item.version):
                    self._propagation.resolve(entry, now=now)
                    report.propagation_resolved.append(name)
                    continue
            except ClaimCheckError as exc:
                report.errors.append(name)
                log.warning("propagation entry %s failed (%s); retried next run", name, type(exc).__name__)
                continue
            report.propagation_exceeded.append(name)
            report.alerts.append(
                f"{name}: reserved but still not visible past its visibility deadline (entry raised"
                f" {_rounded(now - entry.raised_at)} ago); the writer was told to reconcile"
            )

    def _count_dead_letters(self, now: datetime, report: ReconciliationReport) -> None:
        if self._dead_letters is None:
            return
        try:
            counts = self._dead_letters.dead_letter_counts()
        except ClaimCheckError as exc:  # management plane unreachable or not permitted: the run goes on
            report.errors.append("dead-letter counts")
            log.warning("dead-letter counts unavailable (%s); retried next run", type(exc).__name__)
            return
        for found in counts:
            age = found.oldest_age(now)
            report.dead_letters.append(
                {
                    "entity": found.entity,
                    "count": found.count,
                    "oldest_age_seconds": None if age is None else int(age.total_seconds()),
                }
            )
            log.info(
                "dead letters %s: count=%d oldest_age_s=%s",
                found.entity,
                found.count,
                "-" if age is None else int(age.total_seconds()),
            )
        report.alerts.extend(dead_letter_alerts(counts, now, self._dead_letter_alert_age))

    def revoke(self, ref: str, *, why: str) -> bool:
        """Block every further read of an object (e.g. during an investigation); the object and its
        metadata are kept. Returns False if the reference is unknown or no longer readable."""
        record = self._registry.get(ref)
        if record is None or record.state not in (PayloadState.REF_PUBLISHED, PayloadState.AVAILABLE):
            return False
        self._registry.move(record, PayloadState.ACCESS_DENIED, now=self._clock())
        log.warning(
            "ALERT %s v%d: reads revoked (%s); deliveries are dead-lettered access_denied",
            record.work_item_id,
            record.version,
            why,
        )
        return True

    def revoke_work_item(self, work_item_id: str, *, why: str, by: str) -> int | None:
        """Revoke reads of a work item's latest version (its stored object); ``by`` is the identity the
        caller's credential proved, never one it stated. Returns the version, or None when there is
        nothing readable to revoke (unknown work item, inline payload, object no longer readable)."""
        item = self._work_items.get(work_item_id)
        if item is None or not item.receipts:
            return None
        latest = item.receipts[-1]
        if latest.payload_ref is None:  # inline: nothing stored to revoke
            return None
        return latest.version if self.revoke(latest.payload_ref, why=f"{why}; revoked by {by}") else None

    def _reconcile(self, record: PayloadRecord, now: datetime, report: ReconciliationReport) -> None:
        if record.state is PayloadState.PREPARING:
            self._orphan(record, now, report)
        elif record.state is PayloadState.CLEANUP_PENDING:
            self._cleaner.remove(record, why="asynchronous cleanup sweep", now=now)
            report.cleaned_up.append(record.ref)
        elif record.state is PayloadState.PROCESSED and self._cleaned_after_effect(record):
            # Its object is due for deletion once its message is completed, and the consumer's sync
            # cleanup deletes it straight from processed: a gone object is that cleanup interrupted
            # after its delete, not a missing one. Left to the consumer within the grace.
            if self._cleanup_interrupted(record, now):
                self._finish_settlement(record, now, report)
                self._cleaner.remove(
                    record, why="cleanup interrupted after processed; finished by reconciliation", now=now
                )
                report.interrupted_cleanups_finished.append(record.ref)
        elif not self._stores.for_purpose(record.purpose).exists(record.ref):
            self._registry.move(record, PayloadState.MISSING, now=now)
            report.flagged_missing.append(record.ref)
            report.alerts.append(
                f"{record.work_item_id} v{record.version}: registered object is gone while"
                f" {record.state.value}; a consumer will dead-letter it as payload_missing"
            )
        elif record.state is PayloadState.REF_PUBLISHED and now - record.updated_at >= self._activation_grace:
            self._stores.for_purpose(record.purpose).activate(record.ref)
            self._registry.move(record, PayloadState.AVAILABLE, now=now)
            self._work_items.confirm_version(record.work_item_id, record.version, None, now=now)
            report.activations_finished.append(record.ref)
        elif record.state is PayloadState.PROCESSED and self._retention_over(record, now):
            self._finish_settlement(record, now, report)
            self._cleaner.remove(record, why="retention period elapsed", now=now)
            report.retention_removed.append(record.ref)

    def _finish_settlement(self, record: PayloadRecord, now: datetime, report: ReconciliationReport) -> None:
        """Before a processed object goes: the record proves the effect, so the claim's completion and
        the work item's ``completed`` a crash lost next to it are written now (a failing write raises:
        the object stays for the next run). Without them, the next delivery of this version would find
        the object gone with no proof of its effect and dead-letter it ``payload_missing``."""
        repaired = self._settlement_repair.finish(
            record.work_item_id,
            record.version,
            tenant_id=record.tenant_id,
            purpose=record.purpose,
            work_item=self._work_items.get(record.work_item_id),
            now=now,
        )
        if repaired:
            report.settlements_repaired.append(record.ref)
            report.alerts.append(
                f"{record.work_item_id} v{record.version}: effect done, but the settlement lost the"
                f" {' and '.join(repaired)} completion; completed by reconciliation before the object goes"
            )

    def _orphan(self, record: PayloadRecord, now: datetime, report: ReconciliationReport) -> None:
        due = self._removable_at(self._stores.routes.container_for(record.purpose), record.created_at)
        # Past the activation grace only a failed producer leaves a record preparing (never one in flight).
        confirmed = (
            self._confirmed_receipt(record) if now - record.updated_at >= self._activation_grace else None
        )
        if confirmed is not None:
            # A record written while its object uploaded learns the object's ETag with this move; the
            # receipt the work item kept names it.
            etag = record.object_etag or confirmed.object_etag or ""
            self._registry.move(replace(record, object_etag=etag), PayloadState.REF_PUBLISHED, now=now)
            log.warning(
                "ALERT %s v%d: version confirmed but its record was still preparing; moved to"
                " ref_published, activation finishes in the next run",
                record.work_item_id,
                record.version,
            )
            return
        if now < due:
            report.orphans_waiting.append(record.ref)
            report.alerts.append(
                f"{record.work_item_id} v{record.version}: object written, publish not confirmed;"
                f" no worker got access; provisional object removed in {_rounded(due - now)}"
            )
            return
        self._cleaner.remove(record, why="orphan: publish never confirmed within the grace period", now=now)
        report.orphans_removed.append(record.ref)
        report.alerts.append(
            f"{record.work_item_id} v{record.version}: object written, publish not confirmed; no worker got"
            " access; provisional object removed"
        )

    def _confirmed_receipt(self, record: PayloadRecord) -> WriteReceipt | None:
        """The work item's receipt of this record's version and reference, if it confirmed them: the
        producer confirms only after the publish (a receipt names the reference it was written for)."""
        item = self._work_items.get(record.work_item_id)
        written = (record.version, record.ref)
        kept = (
            []
            if item is None
            else [one for one in item.receipts if (one.version, one.payload_ref) == written]
        )
        return kept[-1] if kept else None

    def _sweep_unregistered(self, now: datetime, report: ReconciliationReport) -> None:
        """Provisional objects with no registry record: the producer crashed right after the upload."""
        for container, store in self._stores.each():
            self._sweep_container(container, store, now, report)

    def _sweep_container(
        self, container: str, store: PayloadStore, now: datetime, report: ReconciliationReport
    ) -> None:
        for found in store.provisional_objects():
            try:
                record = self._registry.get(found.ref)
                if record is not None and record.state in _KEPT_ACTIVE:
                    store.activate(found.ref)  # the producer's activation was lost: finish it
                    report.activations_finished.append(found.ref)
                    continue
                if record is not None or now < self._removable_at(container, found.created_at):
                    continue
                self._cleaner.remove_unregistered(
                    found.ref, store, why="orphan: never registered nor published", now=now
                )
            except ClaimCheckError as exc:
                report.errors.append(found.ref)
                log.warning("reconcile %s failed (%s); retried next run", found.ref, type(exc).__name__)
                continue
            report.orphans_removed.append(found.ref)
            report.alerts.append(
                f"{found.ref}: object written, never registered nor published; no worker got access;"
                " provisional object removed"
            )

    def _cleaned_after_effect(self, record: PayloadRecord) -> bool:
        """Whether the record's purpose deletes its object after the effect (sync or async cleanup)."""
        policy = self._purposes.get(record.purpose)
        return policy is not None and policy.cleanup in (CleanupPolicy.SYNC, CleanupPolicy.ASYNC)

    def _cleanup_interrupted(self, record: PayloadRecord, now: datetime) -> bool:
        return now >= record.updated_at + self._interrupted_cleanup_grace

    def _retention_over(self, record: PayloadRecord, now: datetime) -> bool:
        policy = self._purposes.get(record.purpose)
        locked = self._stores.routes.locked_until(
            self._stores.routes.container_for(record.purpose), record.created_at
        )
        return (
            policy is not None
            and policy.cleanup is CleanupPolicy.RETAIN
            and now >= record.updated_at + policy.retention
            and (locked is None or now >= locked)
        )

    def _removable_at(self, container: str, created_at: datetime) -> datetime:
        """When an orphan may go: after the orphan grace, and never while its container's immutability
        policy still locks it (the delete would fail on Azure; Azurite has no such lock)."""
        locked = self._stores.routes.locked_until(container, created_at)
        return max(created_at + self._orphan_grace, locked or created_at)


def _rounded(delay: timedelta) -> str:
    minutes = max(1, round(delay.total_seconds() / 60))
    if minutes >= 48 * 60:  # an orphan in an immutable container waits out its lock: days
        return f"{minutes // (24 * 60)} d"
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h"
