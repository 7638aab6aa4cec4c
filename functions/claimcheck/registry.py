"""The payload registry: the trusted record of every stored object, and its state machine.

One row per object, keyed by its opaque reference. Consumers resolve references here (never from
the message); every state move is checked against ``states.PAYLOAD_MOVES`` and written with an
ETag condition, so an illegal move or a lost race raises instead of passing silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from claimcheck.policy import RecordFacts
from claimcheck.states import PayloadState, check_payload_move
from claimcheck.storage import EntityTable, Key, StoredEntity

_ROW = "payload"


@dataclass(frozen=True)
class PayloadRecord:
    """Metadata of one stored object. ``etag`` is the registry row's, ``object_etag`` the blob's."""

    ref: str
    work_item_id: str
    tenant_id: str
    purpose: str
    classification: str
    environment: str
    content_type: str
    content_length: int
    sha256: str
    version: int
    object_etag: str
    owner: str
    created_at: datetime
    expires_at: datetime
    state: PayloadState
    updated_at: datetime
    etag: str = ""

    def facts(self) -> RecordFacts:
        return RecordFacts(
            work_item_id=self.work_item_id,
            tenant_id=self.tenant_id,
            purpose=self.purpose,
            environment=self.environment,
            classification=self.classification,
            version=self.version,
            content_type=self.content_type,
            expires_at=self.expires_at,
            state=self.state,
        )


class PayloadRegistry:
    def __init__(self, table: EntityTable) -> None:
        self._table = table

    def create(self, record: PayloadRecord) -> PayloadRecord:
        """Record a new object in state ``preparing``; raises ``RecordExists`` if the ref is taken."""
        if record.state is not PayloadState.PREPARING:
            raise ValueError("a new registry record starts in state preparing")
        return replace(record, etag=self._table.insert_if_absent(_key(record.ref), _values(record)))

    def get(self, ref: str) -> PayloadRecord | None:
        stored = self._table.get(_key(ref))
        return None if stored is None else _record(stored)

    def move(self, record: PayloadRecord, target: PayloadState, *, now: datetime) -> PayloadRecord:
        """Move ``record`` to ``target`` iff the move is allowed and nobody changed the row since."""
        check_payload_move(record.state, target)
        moved = replace(record, state=target, updated_at=now)
        return replace(moved, etag=self._table.replace_if_match(_key(moved.ref), _values(moved), record.etag))

    def in_states(self, states: Iterable[PayloadState]) -> Iterator[PayloadRecord]:
        for stored in self._table.scan_where("state", sorted(state.value for state in states)):
            yield _record(stored)


def _key(ref: str) -> Key:
    return Key(ref, _ROW)


def _values(record: PayloadRecord) -> dict[str, Any]:
    values = asdict(record)
    del values["etag"], values["ref"]
    values["state"] = record.state.value
    return values


def _record(stored: StoredEntity) -> PayloadRecord:
    values = stored.values
    return PayloadRecord(
        ref=stored.key.partition,
        work_item_id=values["work_item_id"],
        tenant_id=values["tenant_id"],
        purpose=values["purpose"],
        classification=values["classification"],
        environment=values["environment"],
        content_type=values["content_type"],
        content_length=int(values["content_length"]),
        sha256=values["sha256"],
        version=int(values["version"]),
        object_etag=values["object_etag"],
        owner=values["owner"],
        created_at=values["created_at"],
        expires_at=values["expires_at"],
        state=PayloadState(values["state"]),
        updated_at=values["updated_at"],
        etag=stored.etag,
    )
