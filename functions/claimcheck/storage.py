"""Storage ports: the few operations the core needs from a table store and a blob store.

The logic (registry, ledger, work items, cleanup) lives in pure modules written against these
protocols; ``claimcheck.adapters`` translates them to Azure Tables and Azure Blob Storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, Protocol

from claimcheck.integrity import Hashed, Readable


@dataclass(frozen=True)
class Key:
    """Where a row lives: ``partition`` groups rows read together (one object, one work item), ``row``
    names one row in it. Adapters map it to their store's own key (Azure Tables: PartitionKey/RowKey)."""

    partition: str
    row: str


@dataclass(frozen=True)
class StoredEntity:
    """One row as read: its key, its properties (without the key) and the ETag to condition updates on."""

    key: Key
    values: Mapping[str, Any]
    etag: str


class EntityTable(Protocol):
    """A table with point reads, conditional insert/replace/delete and a scan by one field's values.

    Values are str, int (beyond 32 bits too), float, bool and timezone-aware datetime. ETags are
    opaque strings; every write answers the row's new one.
    """

    def get(self, key: Key) -> StoredEntity | None: ...

    def insert_if_absent(self, key: Key, values: Mapping[str, Any]) -> str:
        """Insert; return the new ETag. Raise ``RecordExists`` if the key is taken."""
        ...

    def replace_if_match(self, key: Key, values: Mapping[str, Any], etag: str) -> str:
        """Replace iff the stored ETag is ``etag``; raise ``ConcurrencyConflict`` / ``RecordNotFound``."""
        ...

    def delete_if_match(self, key: Key, etag: str) -> None:
        """Delete iff the stored ETag is ``etag``; raise ``ConcurrencyConflict``; absent is fine."""
        ...

    def scan_where(self, field: str, values: Iterable[str]) -> Iterator[StoredEntity]:
        """Every row whose ``field`` equals one of ``values`` (rows without the field never match)."""
        ...


@dataclass(frozen=True)
class Tables:
    """The tables one ``ClaimCheck`` works on, by role (their names are the settings' ``*_table``)."""

    registry: EntityTable
    idempotency: EntityTable
    work_items: EntityTable
    audit: EntityTable
    results: EntityTable


@dataclass(frozen=True)
class UploadedObject:
    """What the upload pass learned: length and sha256 of exactly the bytes stored, and the ETag."""

    length: int
    sha256: str
    etag: str


@dataclass(frozen=True)
class ProvisionalObject:
    """An object still tagged provisional (its activation never happened)."""

    ref: str
    created_at: datetime


class PayloadStore(Protocol):
    """Write-once objects named by their opaque reference."""

    def upload_provisional(
        self, ref: str, source: Readable | Hashed, *, content_type: str, max_bytes: int
    ) -> UploadedObject:
        """Write once (never overwrite), hashing while uploading; tag the object provisional.

        A ``Hashed`` payload is already in memory with its sha256: the answer carries that sha256.

        Raise ``ObjectExists`` if the reference is taken, ``ObjectTooLarge`` past ``max_bytes``,
        ``ObjectEmpty`` for no bytes, ``ObjectMismatch("content_type")`` if the first bytes cannot be of
        ``content_type``.
        """
        ...

    def activate(self, ref: str) -> None:
        """Mark the object active (drops the provisional tag the lifecycle backstop looks for); raise
        ``ObjectNotFound`` if it is gone."""
        ...

    def open_verified(
        self,
        ref: str,
        *,
        etag: str,
        length: int,
        sha256: str,
        content_type: str,
        head_bytes: int | None = None,
    ) -> BinaryIO:
        """Stream exactly the recorded object (ETag-conditioned) into a verified, rewound spool.

        ``head_bytes`` keeps only the object's first ``head_bytes`` bytes in the spool (what the analyzer
        reads); the whole object is still streamed and verified before anything is returned.

        Raise ``ObjectNotFound`` if absent, ``ObjectChanged`` if its ETag differs or it changes while
        read, ``ObjectMismatch(field)`` if its length, sha256 or content type differs from the record.
        """
        ...

    def exists(self, ref: str) -> bool: ...

    def delete(self, ref: str) -> bool:
        """Delete the object; return False if it was already gone."""
        ...

    def provisional_objects(self) -> Iterator[ProvisionalObject]: ...
