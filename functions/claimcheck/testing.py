"""Test doubles shipped with the package, in the style of dramatiq's ``StubBroker``.

``InMemoryBus``, ``InMemoryTable`` and ``InMemoryPayloadStore`` implement the core's ports with the
same contract as the Azure adapters (``tests/contract`` runs the same cases against both), so the
producer, consumer, ledger and reconciler can be exercised in milliseconds. They hold everything in
memory and are thread-safe; they are not a stand-in for the guarantees, which Azurite proves.
"""

from __future__ import annotations

import io
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

from claimcheck.errors import (
    ClaimCheckError,
    ConcurrencyConflict,
    ObjectChanged,
    ObjectEmpty,
    ObjectExists,
    ObjectMismatch,
    ObjectNotFound,
    RecordExists,
    RecordNotFound,
)
from claimcheck.integrity import (
    DEFAULT_CHUNK_BYTES,
    Hashed,
    HashingReader,
    Readable,
    check_declared_type,
    read_up_to,
    spool_verified,
)
from claimcheck.messages import InboundMessage, OutboundMessage
from claimcheck.outcome import Complete, Outcome
from claimcheck.policy import base_content_type
from claimcheck.settings import ACTIVE_TAG_VALUE, ProvisionalTag
from claimcheck.storage import Key, ProvisionalObject, StoredEntity, Tables, UploadedObject


class Handles(Protocol):
    def handle(self, message: InboundMessage) -> Outcome: ...


def consume_and_settle(consumer: Handles, message: InboundMessage) -> Outcome:
    """``consumer.handle(message)``, then a ``Complete``'s after-settlement step (the cleanup per
    policy): the whole flow for a caller with no broker to settle with (tests, the bench), in the
    order the trigger runs it once ``complete`` succeeded."""
    outcome = consumer.handle(message)
    if isinstance(outcome, Complete):
        outcome.after_settlement()
    return outcome


class PublishFailed(ClaimCheckError, ConnectionError):
    """Raised by ``InMemoryBus`` when told to fail: the broker did not confirm."""


@dataclass
class InMemoryBus:
    """A ``Bus`` that records what was published, per destination, in order.

    ``fail_next`` makes the next N publishes raise ``PublishFailed`` (a lost publish). There is no
    duplicate detection, so tests see every publish the code makes.
    """

    fail_next: int = 0
    published: dict[str, list[OutboundMessage]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def publish(self, destination: str, message: OutboundMessage) -> None:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PublishFailed(f"simulated: {destination} did not confirm")
            self.published.setdefault(destination, []).append(message)

    def messages(self, destination: str) -> list[OutboundMessage]:
        with self._lock:
            return list(self.published.get(destination, []))

    def deliveries(self, destination: str, *, delivery_count: int | None = 1) -> list[InboundMessage]:
        """What a receiver of ``destination`` would be handed, in publish order (as ``StubBroker``'s
        queues are drained by hand): each published message as the consumer's ``InboundMessage``."""
        return [
            InboundMessage(
                body=sent.body,
                message_id=sent.message_id,
                delivery_count=delivery_count,
                session_id=sent.session_id,
                correlation_id=sent.correlation_id,
                application_properties=dict(sent.application_properties),
                sequence_number=number,
                lock_token=f"memory-lock-{number}-{delivery_count}",
            )
            for number, sent in enumerate(self.messages(destination), start=1)
        ]


_ETAGS = itertools.count(1)


def _next_etag() -> str:
    return f'W/"memory-{next(_ETAGS)}"'


class InMemoryTable:
    """An ``EntityTable`` in a dict: conditional writes on ETags, a scan by one field's values."""

    def __init__(self, name: str = "table") -> None:
        self.name = name
        self._rows: dict[Key, tuple[dict[str, Any], str]] = {}
        self._lock = threading.Lock()

    def get(self, key: Key) -> StoredEntity | None:
        with self._lock:
            found = self._rows.get(key)
        return None if found is None else StoredEntity(key, dict(found[0]), found[1])

    def insert_if_absent(self, key: Key, values: Mapping[str, Any]) -> str:
        with self._lock:
            if key in self._rows:
                raise RecordExists(f"{self.name}: key already taken")
            etag = _next_etag()
            self._rows[key] = (dict(values), etag)
            return etag

    def replace_if_match(self, key: Key, values: Mapping[str, Any], etag: str) -> str:
        with self._lock:
            found = self._rows.get(key)
            if found is None:
                raise RecordNotFound(f"{self.name}: record is gone")
            if found[1] != etag:
                raise ConcurrencyConflict(f"{self.name}: record changed since it was read")
            new_etag = _next_etag()
            self._rows[key] = (dict(values), new_etag)
            return new_etag

    def delete_if_match(self, key: Key, etag: str) -> None:
        with self._lock:
            found = self._rows.get(key)
            if found is None:
                return
            if found[1] != etag:
                raise ConcurrencyConflict(f"{self.name}: record changed since it was read")
            del self._rows[key]

    def scan_where(self, field: str, values: Iterable[str]) -> Iterator[StoredEntity]:
        wanted = set(values)
        with self._lock:
            matching = [
                StoredEntity(key, dict(row), etag)
                for key, (row, etag) in sorted(
                    self._rows.items(), key=lambda item: (item[0].partition, item[0].row)
                )
                if field in row and row[field] in wanted
            ]
        yield from matching

    def rows(self) -> list[StoredEntity]:
        """Every row, in key order (for assertions)."""
        with self._lock:
            return [
                StoredEntity(key, dict(row), etag)
                for key, (row, etag) in sorted(
                    self._rows.items(), key=lambda item: (item[0].partition, item[0].row)
                )
            ]


def in_memory_tables() -> Tables:
    """One ``InMemoryTable`` per role, for ``ClaimCheck.build``."""
    return Tables(
        registry=InMemoryTable("registry"),
        idempotency=InMemoryTable("idempotency"),
        work_items=InMemoryTable("workitems"),
        audit=InMemoryTable("audit"),
        results=InMemoryTable("results"),
    )


@dataclass
class _Object:
    data: bytes
    content_type: str
    etag: str
    tag: str
    created_at: datetime


class InMemoryPayloadStore:
    """A ``PayloadStore`` in a dict: write-once objects, a provisional tag, ETag-conditioned reads.

    Uploads and reads go through the same ``HashingReader`` / ``spool_verified`` as the Azure adapter,
    chunk by chunk. ``tamper`` replaces an object's bytes (a new ETag, as any overwrite has) and
    ``corrupt`` keeps the ETag, for the integrity cases.
    """

    def __init__(
        self,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        provisional_tag: ProvisionalTag | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._chunk_bytes = chunk_bytes
        self._tag = provisional_tag or ProvisionalTag()
        self._clock = clock
        self._objects: dict[str, _Object] = {}
        self._lock = threading.Lock()

    def upload_provisional(
        self, ref: str, source: Readable | Hashed, *, content_type: str, max_bytes: int
    ) -> UploadedObject:
        # A Hashed payload is hashed again here, as any other source.
        reader = HashingReader(
            io.BytesIO(source.data) if isinstance(source, Hashed) else source, max_bytes=max_bytes
        )
        chunks: list[bytes] = []
        while chunk := read_up_to(reader, self._chunk_bytes):
            if not chunks:
                check_declared_type(content_type, reader.head)
            chunks.append(chunk)
        if not chunks:
            raise ObjectEmpty("the payload is empty")
        with self._lock:
            if ref in self._objects:
                raise ObjectExists("an object already exists under this reference")
            stored = _Object(b"".join(chunks), content_type, _next_etag(), self._tag.value, self._clock())
            self._objects[ref] = stored
        return UploadedObject(length=reader.length, sha256=reader.sha256, etag=stored.etag)

    def activate(self, ref: str) -> None:
        with self._lock:
            found = self._objects.get(ref)
            if found is None:
                raise ObjectNotFound(ref)
            found.tag = ACTIVE_TAG_VALUE

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
        with self._lock:
            found = self._objects.get(ref)
        if found is None:
            raise ObjectNotFound(ref)
        if found.etag != etag:
            raise ObjectChanged("the stored object changed after it was registered (ETag differs)")
        if base_content_type(found.content_type) != base_content_type(content_type):
            raise ObjectMismatch(
                "content_type", "the stored object's content type differs from the registered one"
            )
        data = found.data
        chunks = (data[start : start + self._chunk_bytes] for start in range(0, len(data), self._chunk_bytes))
        return spool_verified(
            chunks,
            expected_length=length,
            expected_sha256=sha256,
            content_type=content_type,
            head_bytes=head_bytes,
        )

    def exists(self, ref: str) -> bool:
        with self._lock:
            return ref in self._objects

    def delete(self, ref: str) -> bool:
        with self._lock:
            return self._objects.pop(ref, None) is not None

    def provisional_objects(self) -> Iterator[ProvisionalObject]:
        with self._lock:
            found = [
                ProvisionalObject(ref=ref, created_at=stored.created_at)
                for ref, stored in sorted(self._objects.items())
                if stored.tag == self._tag.value
            ]
        yield from found

    # --- test helpers ------------------------------------------------------------------------------

    def refs(self) -> list[str]:
        with self._lock:
            return sorted(self._objects)

    def read(self, ref: str) -> bytes:
        with self._lock:
            return self._objects[ref].data

    def tag_of(self, ref: str) -> str:
        with self._lock:
            return self._objects[ref].tag

    def tamper(self, ref: str, data: bytes) -> None:
        """Overwrite the bytes behind the store's back (someone replaced the object)."""
        with self._lock:
            self._objects[ref].data = data
            self._objects[ref].etag = _next_etag()

    def corrupt(self, ref: str, data: bytes) -> None:
        """Change the bytes and keep the ETag (a corruption no write announced): only the length and
        sha256 checks can catch it."""
        with self._lock:
            self._objects[ref].data = data
