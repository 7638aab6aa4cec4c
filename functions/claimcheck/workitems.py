"""Work items: versions, receipts and state for the status API (read-after-write, DESIGN §5).

A producer first reserves the next version (``pending_version``), and confirms it only after the
publish is confirmed; the visible ``version`` therefore never runs ahead of what a consumer can
read. ``WorkItemStatus.get(id, min_version=N)`` answers ``awaiting_visibility`` while the confirmed
version is below N, never "not found".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from claimcheck.envelope import format_timestamp
from claimcheck.errors import ConcurrencyConflict, RecordExists, RecordNotFound, WorkItemConflict
from claimcheck.registry import PayloadRegistry
from claimcheck.states import WorkItemState, check_work_item_move
from claimcheck.storage import EntityTable, StoredEntity

_ROW = "workitem"
_KEPT_RECEIPTS = 20
_WRITE_ATTEMPTS = 5
AWAITING_VISIBILITY = "awaiting_visibility"
VERSION_CONFIRMED = "version_confirmed"


@dataclass(frozen=True)
class IntakeReceipt:
    """What a write returns: enough to read the same object back at a version ≥ this one."""

    work_item_id: str
    version: int
    transport: str  # "inline" | "reference"
    payload_ref: str | None
    object_etag: str | None
    record_etag: str
    request_id: str
    message_id: str
    accepted_at: datetime
    visibility_deadline: datetime
    content_length: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "work_item_id": self.work_item_id,
            "version": self.version,
            "transport": self.transport,
            "payload_ref": self.payload_ref,
            "object_etag": self.object_etag,
            "record_etag": self.record_etag,
            "request_id": self.request_id,
            "message_id": self.message_id,
            "accepted_at": format_timestamp(self.accepted_at),
            "visibility_deadline": format_timestamp(self.visibility_deadline),
            "content_length": self.content_length,
            "sha256": self.sha256,
        }


@dataclass(frozen=True)
class WorkItemRecord:
    work_item_id: str
    tenant_id: str
    purpose: str
    version: int  # highest confirmed version (0 = none yet)
    pending_version: int
    state: WorkItemState
    receipts: tuple[Mapping[str, Any], ...]
    result: Mapping[str, Any] | None
    failure_reason: str | None
    updated_at: datetime
    etag: str


@dataclass(frozen=True)
class WorkItemView:
    """What the status API shows. No payload bytes; the result summary only."""

    work_item_id: str
    state: str
    visibility: str
    version: int
    latest_receipt: Mapping[str, Any] | None
    result: Mapping[str, Any] | None
    failure_reason: str | None
    updated_at: datetime | None
    receipt_versions: tuple[int, ...] = ()
    payload_state: str | None = None  # state of the latest version's stored object; "inline" if none

    def to_dict(self) -> dict[str, Any]:
        return {
            "receipt_versions": list(self.receipt_versions),
            "payload_state": self.payload_state,
            "work_item_id": self.work_item_id,
            "state": self.state,
            "visibility": self.visibility,
            "version": self.version,
            "latest_receipt": self.latest_receipt,
            "result": self.result,
            "failure_reason": self.failure_reason,
            "updated_at": None if self.updated_at is None else format_timestamp(self.updated_at),
        }


class WorkItemStore:
    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def get(self, work_item_id: str) -> WorkItemRecord | None:
        stored = self._table.get(work_item_id, _ROW)
        return None if stored is None else _record(stored)

    def reserve_version(self, work_item_id: str, *, tenant_id: str, purpose: str, now: datetime) -> int:
        """Reserve the next version (monotonic: a crashed reservation leaves a gap, never a reuse)."""
        current = self.get(work_item_id)
        if current is None:
            entity = {
                "PartitionKey": work_item_id,
                "RowKey": _ROW,
                "tenant_id": tenant_id,
                "purpose": purpose,
                "version": 0,
                "pending_version": 1,
                "state": WorkItemState.ACCEPTED.value,
                "receipts": "[]",
                "result": "",
                "failure_reason": "",
                "updated_at": now,
            }
            try:
                self._table.insert(entity)
            except RecordExists as exc:
                raise WorkItemConflict("another submission for this work item is in progress") from exc
            return 1
        if current.tenant_id != tenant_id:
            raise WorkItemConflict("this work item id is not available")
        version = max(current.version, current.pending_version) + 1
        try:
            self._table.replace(_entity(current, pending_version=version, updated_at=now), current.etag)
        except (ConcurrencyConflict, RecordNotFound) as exc:
            raise WorkItemConflict("another submission for this work item won the next version") from exc
        return version

    def confirm_version(
        self, work_item_id: str, version: int, receipt: Mapping[str, Any] | None, *, now: datetime
    ) -> str:
        """Make ``version`` the visible one (state accepted); returns the row's new ETag."""
        for _ in range(_WRITE_ATTEMPTS):
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
                return self._table.replace(entity, current.etag)
            except ConcurrencyConflict:
                continue
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
        for _ in range(_WRITE_ATTEMPTS):
            current = self.get(work_item_id)
            if current is None or current.version != version:
                return False
            if current.state is target and target is not WorkItemState.RUNNING:
                return True
            check_work_item_move(current.state, target)
            entity = _entity(
                current, state=target, result=result, failure_reason=failure_reason, updated_at=now
            )
            try:
                self._table.replace(entity, current.etag)
                return True
            except ConcurrencyConflict:
                continue
        raise ConcurrencyConflict(f"work item {work_item_id}: too many concurrent updates")


class WorkItemStatus:
    """The read side of the status API."""

    def __init__(self, store: WorkItemStore, registry: PayloadRegistry) -> None:
        self._store = store
        self._registry = registry

    def get(
        self,
        work_item_id: str,
        *,
        min_version: int | None = None,
        tenant_id: str | None = None,
        tenant_visible: Callable[[str], bool] | None = None,
    ) -> WorkItemView | None:
        """The work item as the authoritative table holds it now.

        With ``min_version``, an absent row or a lower confirmed version means the accepted write is
        not visible yet: the answer is ``awaiting_visibility``, never "not found". With ``tenant_id``
        (or ``tenant_visible``, the caller's tenant scope), another tenant's work item reads as absent.
        """
        record = self._store.get(work_item_id)
        if record is not None and tenant_id is not None and record.tenant_id != tenant_id:
            record = None
        if record is not None and tenant_visible is not None and not tenant_visible(record.tenant_id):
            record = None
        confirmed = 0 if record is None else record.version
        if record is None or confirmed == 0 or (min_version is not None and confirmed < min_version):
            if min_version is None:
                return None
            return WorkItemView(
                work_item_id=work_item_id,
                state=AWAITING_VISIBILITY,
                visibility=AWAITING_VISIBILITY,
                version=0 if record is None else record.version,
                latest_receipt=None,
                result=None,
                failure_reason=None,
                updated_at=None if record is None else record.updated_at,
            )
        latest = record.receipts[-1] if record.receipts else None
        return WorkItemView(
            work_item_id=work_item_id,
            state=record.state.value,
            receipt_versions=tuple(int(receipt["version"]) for receipt in record.receipts),
            payload_state=self._payload_state(latest),
            visibility=VERSION_CONFIRMED,
            version=record.version,
            latest_receipt=latest,
            result=record.result,
            failure_reason=record.failure_reason,
            updated_at=record.updated_at,
        )

    def _payload_state(self, receipt: Mapping[str, Any] | None) -> str | None:
        if receipt is None:
            return None
        if not receipt.get("payload_ref"):
            return "inline"
        payload = self._registry.get(receipt["payload_ref"])
        return None if payload is None else payload.state.value


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
    }
    values.update(changes)
    return {
        "PartitionKey": record.work_item_id,
        "RowKey": _ROW,
        "tenant_id": values["tenant_id"],
        "purpose": values["purpose"],
        "version": values["version"],
        "pending_version": values["pending_version"],
        "state": WorkItemState(values["state"]).value,
        "receipts": json.dumps(list(values["receipts"]), sort_keys=True),
        "result": "" if values["result"] is None else json.dumps(values["result"], sort_keys=True),
        "failure_reason": values["failure_reason"] or "",
        "updated_at": values["updated_at"],
    }


def _record(stored: StoredEntity) -> WorkItemRecord:
    values = stored.values
    return WorkItemRecord(
        work_item_id=values["PartitionKey"],
        tenant_id=values["tenant_id"],
        purpose=values["purpose"],
        version=int(values["version"]),
        pending_version=int(values["pending_version"]),
        state=WorkItemState(values["state"]),
        receipts=tuple(json.loads(values["receipts"])),
        result=json.loads(values["result"]) if values["result"] else None,
        failure_reason=values["failure_reason"] or None,
        updated_at=values["updated_at"],
        etag=stored.etag,
    )
