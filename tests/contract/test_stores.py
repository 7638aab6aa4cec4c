"""The storage ports' contract: the same cases against the shipped fakes and against Azurite.

Each case runs twice: on ``claimcheck.testing`` (marker ``unit``, part of ``make check``) and on the
Azure adapters over a real Azurite (marker ``integration``). The fakes are only as good as this file:
a behaviour the core relies on belongs here, so that the fast tests on the fakes mean something.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from claimcheck.errors import (
    ConcurrencyConflict,
    ObjectChanged,
    ObjectEmpty,
    ObjectExists,
    ObjectMismatch,
    ObjectNotFound,
    ObjectTooLarge,
    RecordExists,
    RecordNotFound,
)
from claimcheck.settings import ProvisionalTag
from claimcheck.storage import EntityTable, Key, PayloadStore, UploadedObject
from claimcheck.testing import InMemoryPayloadStore, InMemoryTable

BACKENDS = [
    pytest.param("memory", marks=pytest.mark.unit),
    pytest.param("azurite", marks=pytest.mark.integration),
]
CHUNK = 16 * 1024
TEXT = "text/plain"


@pytest.fixture(params=BACKENDS)
def table(request: pytest.FixtureRequest) -> EntityTable:
    if request.param == "memory":
        return InMemoryTable()
    from azure.data.tables import TableServiceClient
    from claimcheck.adapters.tables import AzureEntityTable

    service = TableServiceClient.from_connection_string(request.getfixturevalue("storage_connection_string"))
    return AzureEntityTable(service.create_table(f"contract{uuid.uuid4().hex[:12]}"))


@dataclass
class Objects:
    store: PayloadStore
    tamper: Callable[[str, bytes], None]  # replace the bytes behind the store's back


@pytest.fixture(params=BACKENDS)
def objects(request: pytest.FixtureRequest) -> Iterator[Objects]:
    tag = ProvisionalTag("cc-contract", "pending")
    if request.param == "memory":
        memory = InMemoryPayloadStore(chunk_bytes=CHUNK, provisional_tag=tag)
        yield Objects(memory, memory.tamper)
        return
    from azure.storage.blob import BlobServiceClient, ContentSettings
    from claimcheck.adapters.blobs import AzureBlobPayloadStore

    service = BlobServiceClient.from_connection_string(request.getfixturevalue("storage_connection_string"))
    container = service.create_container(f"contract-{uuid.uuid4().hex[:12]}")

    def tamper(ref: str, data: bytes) -> None:
        container.upload_blob(ref, data, overwrite=True, content_settings=ContentSettings(content_type=TEXT))

    yield Objects(AzureBlobPayloadStore(container, chunk_bytes=CHUNK, provisional_tag=tag), tamper)
    container.delete_container()


# --- tables -------------------------------------------------------------------------------------------

MOMENT = datetime(2026, 12, 1, 6, 30, 15, 123000, tzinfo=UTC)
VALUES = {"name": "x", "count": 7, "big": 3 * 1024**3, "flag": True, "ratio": 0.5, "at": MOMENT}


def test_a_row_round_trips_its_values_and_key(table: EntityTable) -> None:
    etag = table.insert_if_absent(Key("p", "r"), VALUES)
    stored = table.get(Key("p", "r"))
    assert stored is not None
    assert (stored.key, stored.etag) == (Key("p", "r"), etag)
    assert dict(stored.values) == VALUES  # no key properties among the values; ints beyond 32 bits kept
    assert table.get(Key("p", "other")) is None
    assert table.get(Key("other", "r")) is None


def test_insert_if_absent_refuses_a_taken_key(table: EntityTable) -> None:
    table.insert_if_absent(Key("p", "r"), {"name": "first"})
    with pytest.raises(RecordExists):
        table.insert_if_absent(Key("p", "r"), {"name": "second"})
    stored = table.get(Key("p", "r"))
    assert stored is not None
    assert stored.values["name"] == "first"


def test_replace_if_match_wins_once_per_etag(table: EntityTable) -> None:
    first = table.insert_if_absent(Key("p", "r"), {"name": "v1"})
    second = table.replace_if_match(Key("p", "r"), {"name": "v2"}, first)
    assert second != first
    with pytest.raises(ConcurrencyConflict):
        table.replace_if_match(Key("p", "r"), {"name": "lost"}, first)
    stored = table.get(Key("p", "r"))
    assert stored is not None
    assert (stored.values["name"], stored.etag) == ("v2", second)
    with pytest.raises(RecordNotFound):
        table.replace_if_match(Key("p", "absent"), {"name": "x"}, first)


def test_delete_if_match_is_conditional_and_absent_is_fine(table: EntityTable) -> None:
    etag = table.insert_if_absent(Key("p", "r"), {"name": "v1"})
    newer = table.replace_if_match(Key("p", "r"), {"name": "v2"}, etag)
    with pytest.raises(ConcurrencyConflict):
        table.delete_if_match(Key("p", "r"), etag)
    table.delete_if_match(Key("p", "r"), newer)
    assert table.get(Key("p", "r")) is None
    table.delete_if_match(Key("p", "r"), newer)  # already gone


def test_scan_where_matches_any_of_the_values_and_skips_rows_without_the_field(table: EntityTable) -> None:
    table.insert_if_absent(Key("a", "1"), {"state": "open"})
    table.insert_if_absent(Key("a", "2"), {"state": "closed"})
    table.insert_if_absent(Key("b", "1"), {"state": "pending"})
    table.insert_if_absent(Key("c", "1"), {"other": "open"})
    found = {(row.key, row.values["state"]) for row in table.scan_where("state", ["open", "pending"])}
    assert found == {(Key("a", "1"), "open"), (Key("b", "1"), "pending")}
    assert list(table.scan_where("state", [])) == []
    assert list(table.scan_where("state", ["it's"])) == []  # values are parameters, never query text


# --- payload objects ----------------------------------------------------------------------------------

REF = "ref_" + "c" * 27
BODY = b"The Supplier shall deliver the goods.\n" * 2000  # several chunks


def _upload(
    objects: Objects, data: bytes = BODY, *, content_type: str = TEXT, ref: str = REF
) -> UploadedObject:
    return objects.store.upload_provisional(ref, io.BytesIO(data), content_type=content_type, max_bytes=10**6)


def test_upload_hashes_in_the_same_pass_and_reads_back_verified(objects: Objects) -> None:
    uploaded = _upload(objects)
    assert (uploaded.length, uploaded.sha256) == (len(BODY), hashlib.sha256(BODY).hexdigest())
    spool = objects.store.open_verified(
        REF, etag=uploaded.etag, length=uploaded.length, sha256=uploaded.sha256, content_type=TEXT
    )
    assert spool.read() == BODY
    assert objects.store.exists(REF)


def test_objects_are_write_once(objects: Objects) -> None:
    uploaded = _upload(objects)
    with pytest.raises(ObjectExists):
        _upload(objects, b"other bytes")
    spool = objects.store.open_verified(
        REF, etag=uploaded.etag, length=uploaded.length, sha256=uploaded.sha256, content_type=TEXT
    )
    assert spool.read() == BODY


def test_upload_refuses_empty_oversized_and_mislabelled_bytes(objects: Objects) -> None:
    with pytest.raises(ObjectEmpty):
        _upload(objects, b"")
    with pytest.raises(ObjectTooLarge) as too_large:
        objects.store.upload_provisional(REF, io.BytesIO(BODY), content_type=TEXT, max_bytes=len(BODY) - 1)
    assert too_large.value.limit == len(BODY) - 1
    with pytest.raises(ObjectMismatch) as mislabelled:
        _upload(objects, b"not a pdf", content_type="application/pdf")
    assert mislabelled.value.field == "content_type"
    assert not objects.store.exists(REF)


def test_provisional_until_activated(objects: Objects) -> None:
    _upload(objects)
    assert [found.ref for found in objects.store.provisional_objects()] == [REF]
    objects.store.activate(REF)
    assert list(objects.store.provisional_objects()) == []
    with pytest.raises(ObjectNotFound):
        objects.store.activate("ref_" + "d" * 27)


def test_reads_refuse_anything_but_the_recorded_object(objects: Objects) -> None:
    uploaded = _upload(objects)

    def recorded(ref: str = REF, content_type: str = TEXT) -> object:
        return objects.store.open_verified(
            ref, etag=uploaded.etag, length=uploaded.length, sha256=uploaded.sha256, content_type=content_type
        )

    with pytest.raises(ObjectNotFound):
        recorded("ref_" + "d" * 27)
    with pytest.raises(ObjectMismatch) as wrong_type:
        recorded(content_type="application/pdf")
    assert wrong_type.value.field == "content_type"
    with pytest.raises(ObjectMismatch) as wrong_hash:
        objects.store.open_verified(
            REF, etag=uploaded.etag, length=uploaded.length, sha256="0" * 64, content_type=TEXT
        )
    assert wrong_hash.value.field == "sha256"
    with pytest.raises(ObjectMismatch) as wrong_length:
        objects.store.open_verified(
            REF, etag=uploaded.etag, length=uploaded.length - 1, sha256=uploaded.sha256, content_type=TEXT
        )
    assert wrong_length.value.field == "length"
    objects.tamper(REF, BODY.replace(b"Supplier", b"Supp1ier"))
    with pytest.raises(ObjectChanged):
        recorded()


def test_a_kept_head_is_handed_out_only_once_the_whole_object_is_verified(objects: Objects) -> None:
    """``head_bytes``: the first bytes only, after every range is read and checked against the record."""
    uploaded = _upload(objects)

    def head(*, length: int = uploaded.length, sha256: str = uploaded.sha256, head_bytes: int = 100) -> bytes:
        return objects.store.open_verified(
            REF, etag=uploaded.etag, length=length, sha256=sha256, content_type=TEXT, head_bytes=head_bytes
        ).read()

    assert head() == BODY[:100]
    assert head(head_bytes=len(BODY) + 1) == BODY
    other_tail = hashlib.sha256(BODY[:-1] + b"!").hexdigest()  # a record whose bytes differ at the end
    with pytest.raises(ObjectMismatch) as wrong_hash:
        head(sha256=other_tail)
    assert wrong_hash.value.field == "sha256"
    with pytest.raises(ObjectMismatch) as wrong_length:
        head(length=uploaded.length - 1)
    assert wrong_length.value.field == "length"


def test_delete_says_whether_the_object_existed(objects: Objects) -> None:
    _upload(objects)
    assert objects.store.delete(REF) is True
    assert objects.store.delete(REF) is False
    assert not objects.store.exists(REF)
    assert list(objects.store.provisional_objects()) == []
