"""Work items: versions, receipts and state for the status API (read-after-write, docs/architecture.md §8).

A producer first reserves the next version (``pending_version``), and confirms it only after the
publish is confirmed; the visible ``version`` therefore never runs ahead of what a consumer can
read. ``WorkItemStatus.get(id, min_version=N)`` answers per ``claimcheck.final_states``:
``awaiting_visibility`` while a reserved N is inside its window, ``unknown_version`` if N was never
reserved, ``propagation_exceeded`` after the window, and so on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from claimcheck.errors import (
    ClaimCheckError,
    ConcurrencyConflict,
    ConflictDetected,
    PreconditionRequired,
    RecordExists,
    RecordNotFound,
    WorkItemConflict,
)
from claimcheck.final_states import (
    AWAITING_VISIBILITY,
    PROPAGATION_EXCEEDED,
    UNKNOWN_VERSION,
    FinalAnswer,
    VersionFacts,
    decide,
)
from claimcheck.propagation import PropagationEntries
from claimcheck.receipts import IntakeReceipt as IntakeReceipt  # re-exported: the public API's name
from claimcheck.receipts import WriteReceipt
from claimcheck.registry import PayloadRegistry
from claimcheck.states import WorkItemState, check_work_item_move
from claimcheck.storage import EntityTable, Key, StoredEntity
from claimcheck.timestamps import format_timestamp

# A new work item's first version: a fresh id's reservation always answers it.
FIRST_VERSION = 1
_ROW = "workitem"
# Marks the row a generated id's reservation inserts (the first confirmation's replace drops it).
_RESERVATION, _GENERATED = "reservation", "generated_id"
_KEPT_RECEIPTS = 20
_WRITE_ATTEMPTS = 5
log = logging.getLogger(__name__)
# Answers in which the asked version is not visible: the view shows no receipt or result.
_NOTHING_VISIBLE = frozenset({AWAITING_VISIBILITY, UNKNOWN_VERSION, PROPAGATION_EXCEEDED})


@dataclass(frozen=True)
class WorkItemRecord:
    work_item_id: str
    tenant_id: str
    purpose: str
    version: int  # highest confirmed version (0 = none yet)
    pending_version: int
    state: WorkItemState
    receipts: tuple[WriteReceipt, ...]
    result: Mapping[str, Any] | None
    failure_reason: str | None
    updated_at: datetime
    etag: str
    reserved_at: datetime | None = None  # when pending_version was reserved (None: rows before this)
    # The row as ``reserve`` found it (None: ``reserve`` inserted the row), so that ``release`` can put it
    # back. Not stored: only the reservation's own answer carries it.
    before_reservation: WorkItemRecord | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class WorkItemView:
    """What the status API shows. No payload bytes; the result summary only."""

    work_item_id: str
    state: str
    visibility: str
    version: int
    latest_receipt: WriteReceipt | None
    result: Mapping[str, Any] | None
    failure_reason: str | None
    updated_at: datetime | None
    receipt_versions: tuple[int, ...] = ()
    payload_state: str | None = None  # state of the latest version's stored object; "inline" if none
    answer: FinalAnswer | None = None  # the read-after-write state and the agent's next action

    def to_dict(self) -> dict[str, Any]:
        return {
            **(self.answer.to_dict() if self.answer else {}),
            "receipt_versions": list(self.receipt_versions),
            "payload_state": self.payload_state,
            "work_item_id": self.work_item_id,
            "state": self.state,
            "visibility": self.visibility,
            "version": self.version,
            "latest_receipt": None if self.latest_receipt is None else self.latest_receipt.to_dict(),
            "result": self.result,
            "failure_reason": self.failure_reason,
            "updated_at": None if self.updated_at is None else format_timestamp(self.updated_at),
        }


class WorkItemReader(Protocol):
    """The status read port: where ``WorkItemStatus`` reads a work item's row."""

    # False for a reader that may answer an older row than the table holds (a cache, a replica).
    @property
    def authoritative(self) -> bool: ...

    def get(self, work_item_id: str) -> WorkItemRecord | None: ...


class WorkItemStore:
    authoritative = True  # point reads of the table itself (strongly consistent)

    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def get(self, work_item_id: str) -> WorkItemRecord | None:
        stored = self._table.get(_key(work_item_id))
        return None if stored is None else _record(stored)

    def reserve(
        self,
        work_item_id: str,
        *,
        tenant_id: str,
        purpose: str,
        now: datetime,
        if_match: int | None = None,
        require_if_match: bool = False,
        in_flight: timedelta = timedelta(seconds=30),
        fresh: bool = False,
    ) -> WorkItemRecord:
        """Reserve the next version (monotonic: a crashed reservation leaves a gap, never a reuse) and
        answer the row as written (its ETag conditions ``confirm_version``).

        Conditional writes (docs/architecture.md §8): ``if_match`` must equal the confirmed version, and no
        other reservation younger than ``in_flight`` may be pending (two writers presenting the same current
        version would otherwise both win). With ``require_if_match`` a work item that already has a
        confirmed version refuses a write without ``if_match``.

        ``fresh``: the id was just generated by this intake, so nobody else can hold it; the read that
        would find no row is skipped (the conditional insert alone decides, one round trip).
        """
        key = _key(work_item_id)
        current = None if fresh else self.get(work_item_id)
        if current is not None and current.tenant_id != tenant_id:
            raise WorkItemConflict("this work item id is not available")
        _check_precondition(current, if_match, require_if_match, now=now, in_flight=in_flight)
        if current is None:
            entity = {
                "tenant_id": tenant_id,
                "purpose": purpose,
                "version": 0,
                "pending_version": FIRST_VERSION,
                "state": WorkItemState.ACCEPTED.value,
                "receipts": "[]",
                "result": "",
                "failure_reason": "",
                "updated_at": now,
                "reserved_at": now,
                # A generated id nobody can submit again: the reconciler may release its row if never
                # confirmed (a caller's own id may come back, and must never reuse a published version).
                **({_RESERVATION: _GENERATED} if fresh else {}),
            }
            try:
                return _record(StoredEntity(key, entity, self._table.insert_if_absent(key, entity)))
            except RecordExists as exc:
                raise WorkItemConflict("another submission for this work item is in progress") from exc
        for _ in range(_WRITE_ATTEMPTS):
            version = max(current.version, current.pending_version) + 1
            entity = _entity(current, pending_version=version, updated_at=now, reserved_at=now)
            try:
                etag = self._table.replace_if_match(key, entity, current.etag)
                return replace(_record(StoredEntity(key, entity, etag)), before_reservation=current)
            except RecordNotFound as exc:
                raise WorkItemConflict("this work item changed under this submission; retry") from exc
            except ConcurrencyConflict as exc:
                # A consumer moving the processing state changes the row, not its versions: try again.
                latest = self.get(work_item_id)
                if latest is None or (latest.version, latest.pending_version) != (
                    current.version,
                    current.pending_version,
                ):
                    if if_match is not None:
                        raise ConflictDetected(
                            "another submission won the next version; re-read before writing",
                            current_version=0 if latest is None else latest.version,
                        ) from exc
                    raise WorkItemConflict("another submission won this work item's next version") from exc
                current = latest
        raise WorkItemConflict(f"work item {work_item_id}: too many concurrent updates; retry")

    def release(self, reserved: WorkItemRecord) -> None:
        """Undo ``reserve`` for an intake that stopped before it published anything (its body refused
        while streaming, Storage failing under the upload): no message and no receipt names that version,
        so the next write may take its number, and nothing must wait for it as a write in flight
        (``_check_precondition``). Puts back the row as ``reserve`` found it, or deletes the row
        ``reserve`` inserted; conditional on the row as reserved (``ConcurrencyConflict`` if anything
        changed it since, and the reservation then ages out of its in-flight window as a crash's would).
        Never after a publish was attempted: a message that may exist keeps its version number unused.
        """
        key = _key(reserved.work_item_id)
        before = reserved.before_reservation
        if before is None:
            self._table.delete_if_match(key, reserved.etag)
        else:
            self._table.replace_if_match(key, _entity(before), reserved.etag)

    def release_fresh(self, reserved: WorkItemRecord) -> None:
        """Remove the row ``reserve(fresh=True)`` wrote, when its intake failed before the id was published
        or given to anyone: nothing can refer to it, so it would only stay for ever. Conditional on the row
        as reserved (``ConcurrencyConflict`` if anything changed it since)."""
        self._table.delete_if_match(_key(reserved.work_item_id), reserved.etag)

    def unconfirmed_reservations(self, reserved_before: datetime) -> Iterator[WorkItemRecord]:
        """Rows of generated ids (``reserve(fresh=True)``) whose first version was reserved before
        ``reserved_before`` and never confirmed (``version`` 0): an intake that failed after its
        reservation and could not release it (storage down). Nobody was given such an id, so releasing
        its row can never let a version number of it be used twice."""
        for stored in self._table.scan_where(_RESERVATION, [_GENERATED]):
            record = _record(stored)
            if (
                record.version == 0
                and record.reserved_at is not None
                and record.reserved_at < reserved_before
            ):
                yield record

    def confirm_version(
        self,
        work_item_id: str,
        version: int,
        receipt: WriteReceipt | None,
        *,
        now: datetime,
        known: WorkItemRecord | None = None,
    ) -> str:
        """Make ``version`` the visible one (state accepted); returns the row's new ETag.

        ``known``: the row as this caller last wrote or read it (``reserve``'s answer). The replace is
        conditioned on its ETag without reading the row first; only a lost race reads it again.
        """
        current = known
        for _ in range(_WRITE_ATTEMPTS):
            if current is None:
                current = self.get(work_item_id)
            if current is None:
                raise RecordNotFound(f"work item {work_item_id} has no reservation")
            if current.version >= version:
                return current.etag  # already confirmed (by us earlier, or by the reconciler)
            check_work_item_move(current.state, WorkItemState.ACCEPTED)
            receipts = (*current.receipts, receipt)[-_KEPT_RECEIPTS:] if receipt else current.receipts
            entity = _entity(
                current,
                version=version,
                state=WorkItemState.ACCEPTED,
                receipts=receipts,
                result=None,
                failure_reason=None,
                updated_at=now,
            )
            try:
                return self._table.replace_if_match(_key(work_item_id), entity, current.etag)
            except ConcurrencyConflict:
                current = None
        raise ConcurrencyConflict(f"work item {work_item_id}: too many concurrent updates")

    def set_state(
        self,
        work_item_id: str,
        version: int,
        target: WorkItemState,
        *,
        now: datetime,
        result: Mapping[str, Any] | None = None,
        failure_reason: str | None = None,
    ) -> bool:
        """Move the state of ``version``; False if that version is not the visible one any more."""
        moved, _ = self.move_state(
            None, work_item_id, version, target, now=now, result=result, failure_reason=failure_reason
        )
        return moved

    def move_state(
        self,
        known: WorkItemRecord | None,
        work_item_id: str,
        version: int,
        target: WorkItemState,
        *,
        now: datetime,
        result: Mapping[str, Any] | None = None,
        failure_reason: str | None = None,
    ) -> tuple[bool, WorkItemRecord | None]:
        """``set_state`` from ``known`` (the row as last read or written, None: read it first).

        Answers whether the move holds and the row as written (None when not written), so the next
        move of the same row conditions on that ETag instead of reading the row again; a lost race
        (ETag changed) reads it once more and decides again, exactly as ``set_state``.
        """
        key = _key(work_item_id)
        current = known
        for _ in range(_WRITE_ATTEMPTS):
            if current is None:
                current = self.get(work_item_id)
            if current is None or current.version != version:
                return False, None
            if current.state is target and target is not WorkItemState.RUNNING:
                return True, current
            check_work_item_move(current.state, target)
            entity = _entity(
                current, state=target, result=result, failure_reason=failure_reason, updated_at=now
            )
            try:
                etag = self._table.replace_if_match(key, entity, current.etag)
            except ConcurrencyConflict:
                current = None
                continue
            return True, _record(StoredEntity(key, entity, etag))
        raise ConcurrencyConflict(f"work item {work_item_id}: too many concurrent updates")


class WorkItemStatus:
    """The read side of the status API: the authoritative row, answered per docs/architecture.md §8."""

    def __init__(
        self,
        store: WorkItemReader,
        registry: PayloadRegistry,
        *,
        window: timedelta = timedelta(seconds=30),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        entries: PropagationEntries | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        self._window = window
        self._clock = clock
        self._entries = entries

    def get(
        self,
        work_item_id: str,
        *,
        min_version: int | None = None,
        tenant_id: str | None = None,
        tenant_visible: Callable[[str], bool] | None = None,
    ) -> WorkItemView | None:
        """The work item as the authoritative table holds it now, with its read-after-write answer.

        None: no visible version and no ``min_version`` asked (a plain 404). With ``min_version`` the
        view's ``answer`` is ``claimcheck.final_states.decide``'s; an absent row is ``unknown_version``.
        With ``tenant_id`` (or ``tenant_visible``, the caller's tenant scope), another tenant's work
        item reads as absent.
        """
        record = self._store.get(work_item_id)
        if record is not None and tenant_id is not None and record.tenant_id != tenant_id:
            record = None
        if record is not None and tenant_visible is not None and not tenant_visible(record.tenant_id):
            record = None
        if min_version is None and (record is None or record.version == 0):
            return None
        latest = None if record is None or not record.receipts else record.receipts[-1]
        payload_state = self._payload_state(latest)
        facts = None
        if record is not None:
            facts = VersionFacts(
                confirmed_version=record.version,
                pending_version=max(record.pending_version, record.version),
                reserved_at=record.reserved_at or record.updated_at,
                processing_state=record.state.value if record.version else None,
                payload_state=payload_state,
                receipts=record.receipts,
                authoritative=self._store.authoritative,
            )
        now = self._clock()
        answer = decide(facts, min_version, now=now, window=self._window)
        if answer.visibility == PROPAGATION_EXCEEDED:
            self._raise_entry(work_item_id, max(min_version or 1, 1), now)
        if record is None or answer.visibility in _NOTHING_VISIBLE:
            return WorkItemView(
                work_item_id=work_item_id,
                state=answer.visibility,
                visibility=answer.visibility,
                version=0 if record is None else record.version,
                latest_receipt=None,
                result=None,
                failure_reason=None,
                updated_at=None if record is None else record.updated_at,
                answer=answer,
            )
        return WorkItemView(
            work_item_id=work_item_id,
            state=record.state.value,
            receipt_versions=tuple(receipt.version for receipt in record.receipts),
            payload_state=payload_state,
            visibility=answer.visibility,
            version=record.version,
            latest_receipt=latest,
            result=record.result,
            failure_reason=record.failure_reason,
            updated_at=record.updated_at,
            answer=answer,
        )

    def record(self, work_item_id: str) -> WorkItemRecord | None:
        """The work item's row as intake and the consumer wrote it (None: no record): its tenant, set at
        intake from the caller's identity, never changes (``reserve`` refuses another tenant), and its
        receipts say which message intake published for each version. The operator routes attribute a
        dead letter by it (claimcheck.dead_letter_scope), never by what a message states."""
        return self._store.get(work_item_id)

    def _raise_entry(self, work_item_id: str, version: int, now: datetime) -> None:
        """The reconciliation entry docs/architecture.md §8 asks for, once per (work item, version). A
        failed write does not change the answer (it was read); the next read of that version tries
        again."""
        if self._entries is None:
            raised = True
        else:
            try:
                raised = self._entries.raise_entry(work_item_id, version, now=now)
            except ClaimCheckError as error:  # storage failed: the next read tries again
                log.warning(
                    "reconciliation entry for %s v%d not recorded (%s); the next read retries",
                    work_item_id,
                    version,
                    type(error).__name__,
                )
                return
        if raised:
            log.warning(
                "ALERT %s: version %d reserved but not visible after %s; reconciliation entry raised",
                work_item_id,
                version,
                self._window,
            )

    def _payload_state(self, receipt: WriteReceipt | None) -> str | None:
        if receipt is None:
            return None
        if not receipt.payload_ref:
            return "inline"
        payload = self._registry.get(receipt.payload_ref)
        return None if payload is None else payload.state.value


def _check_precondition(
    current: WorkItemRecord | None,
    if_match: int | None,
    require_if_match: bool,
    *,
    now: datetime,
    in_flight: timedelta,
) -> None:
    confirmed = 0 if current is None else current.version
    if if_match is None:
        if require_if_match and confirmed > 0:
            raise PreconditionRequired(
                f"work item exists at version {confirmed}; send If-Match with the version you read",
                current_version=confirmed,
            )
        return
    if if_match != confirmed:
        raise ConflictDetected(
            f"If-Match {if_match} is not the current version {confirmed}; re-read before writing",
            current_version=confirmed,
        )
    if current is not None and current.pending_version > confirmed and now - current.updated_at < in_flight:
        raise ConflictDetected(
            f"version {current.pending_version} is being written by another request; re-read",
            current_version=confirmed,
        )


def _key(work_item_id: str) -> Key:
    return Key(work_item_id, _ROW)


def _entity(record: WorkItemRecord, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "tenant_id": record.tenant_id,
        "purpose": record.purpose,
        "version": record.version,
        "pending_version": record.pending_version,
        "state": record.state,
        "receipts": record.receipts,
        "result": record.result,
        "failure_reason": record.failure_reason,
        "updated_at": record.updated_at,
        "reserved_at": record.reserved_at,
    }
    values.update(changes)
    return {
        "tenant_id": values["tenant_id"],
        "purpose": values["purpose"],
        "version": values["version"],
        "pending_version": values["pending_version"],
        "state": WorkItemState(values["state"]).value,
        "receipts": json.dumps([receipt.to_dict() for receipt in values["receipts"]], sort_keys=True),
        "result": "" if values["result"] is None else json.dumps(values["result"], sort_keys=True),
        "failure_reason": values["failure_reason"] or "",
        "updated_at": values["updated_at"],
        **({"reserved_at": values["reserved_at"]} if values["reserved_at"] is not None else {}),
    }


def _record(stored: StoredEntity) -> WorkItemRecord:
    values = stored.values
    return WorkItemRecord(
        work_item_id=stored.key.partition,
        tenant_id=values["tenant_id"],
        purpose=values["purpose"],
        version=int(values["version"]),
        pending_version=int(values["pending_version"]),
        state=WorkItemState(values["state"]),
        receipts=tuple(WriteReceipt.from_dict(kept) for kept in json.loads(values["receipts"])),
        result=json.loads(values["result"]) if values["result"] else None,
        failure_reason=values["failure_reason"] or None,
        updated_at=values["updated_at"],
        etag=stored.etag,
        reserved_at=values.get("reserved_at"),
    )
