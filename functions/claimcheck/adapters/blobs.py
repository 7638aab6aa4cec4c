"""Azure Blob Storage adapter of the ``PayloadStore`` port (azure-storage-blob).

Objects are write-once block blobs named by their opaque reference. An object smaller than one
chunk is one Put Blob; a larger upload stages one block per chunk read through a ``HashingReader``
(sha256 and length come out of the upload pass; memory holds one chunk) and commits with
``If-None-Match: *``. A blob index tag marks provisional objects so that the storage lifecycle rule
can backstop orphans; activation rewrites the tag (which leaves the ETag unchanged, so readers still
condition on the ETag recorded at upload).
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.storage.blob import BlobBlock, ContentSettings

from claimcheck.adapters.sdk_errors import storage_errors
from claimcheck.concurrently import both, read_ahead
from claimcheck.errors import (
    ObjectChanged,
    ObjectEmpty,
    ObjectExists,
    ObjectMismatch,
    ObjectNotFound,
    ObjectTooLarge,
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
from claimcheck.policy import base_content_type
from claimcheck.settings import ACTIVE_TAG_VALUE, ProvisionalTag
from claimcheck.storage import ProvisionalObject, UploadedObject

if TYPE_CHECKING:
    from azure.storage.blob import BlobClient, ContainerClient


DEFAULT_PROVISIONAL_TAG = ProvisionalTag()


class AzureBlobPayloadStore:
    """Payload objects in one private container."""

    def __init__(
        self,
        container: ContainerClient,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        provisional_tag: ProvisionalTag = DEFAULT_PROVISIONAL_TAG,
    ) -> None:
        self._container = container
        self._chunk_bytes = chunk_bytes
        # Settings.provisional_tag: the topology's tag, which the lifecycle backstop rule matches.
        self._tag = provisional_tag

    def upload_provisional(
        self, ref: str, source: Readable | Hashed, *, content_type: str, max_bytes: int
    ) -> UploadedObject:
        with storage_errors("blob upload"):
            blob = self._container.get_blob_client(ref)
            if isinstance(source, Hashed) and 0 < source.length < self._chunk_bytes:
                if source.length > max_bytes:
                    raise ObjectTooLarge(max_bytes)
                check_declared_type(content_type, source.head)
                written = self._put_whole(blob, source.data, content_type)  # hashed once, by the caller
                return UploadedObject(length=source.length, sha256=source.sha256, etag=written)
            reader = HashingReader(
                io.BytesIO(source.data) if isinstance(source, Hashed) else source, max_bytes=max_bytes
            )
            first = read_up_to(reader, self._chunk_bytes)
            if first:
                check_declared_type(content_type, reader.head)
            if 0 < len(first) < self._chunk_bytes:
                written = self._put_whole(blob, first, content_type)
                return UploadedObject(length=reader.length, sha256=reader.sha256, etag=written)
            block_ids: list[str] = []
            chunk = first
            while chunk:
                block_id = base64.b64encode(f"{len(block_ids):08d}".encode()).decode("ascii")
                # The next chunk is read and hashed while this one is on the wire (two chunks in memory).
                _, chunk = both(
                    functools.partial(blob.stage_block, block_id, chunk, length=len(chunk)),
                    functools.partial(read_up_to, reader, self._chunk_bytes),
                )
                block_ids.append(block_id)
            if not block_ids:
                raise ObjectEmpty("the payload is empty")
            try:
                committed = blob.commit_block_list(
                    [BlobBlock(block_id=block_id) for block_id in block_ids],
                    content_settings=ContentSettings(content_type=content_type),
                    tags={self._tag.name: self._tag.value},
                    match_condition=MatchConditions.IfMissing,
                )
            except ResourceExistsError as exc:
                # Write-once: an existing object is never overwritten, whatever the caller intended.
                raise ObjectExists("an object already exists under this reference") from exc
            return UploadedObject(length=reader.length, sha256=reader.sha256, etag=str(committed["etag"]))

    def _put_whole(self, blob: BlobClient, data: bytes, content_type: str) -> str:
        """The whole object fits in one chunk: one Put Blob (same write-once condition, same tag) instead
        of a block and its commit, one round trip less. Answers the ETag."""
        try:
            written = blob.upload_blob(
                data,
                length=len(data),
                overwrite=False,
                content_settings=ContentSettings(content_type=content_type),
                tags={self._tag.name: self._tag.value},
                match_condition=MatchConditions.IfMissing,
            )
        except (ResourceExistsError, ResourceModifiedError) as exc:
            raise ObjectExists("an object already exists under this reference") from exc
        return str(written["etag"])

    def activate(self, ref: str) -> None:
        with storage_errors("blob activate"):
            try:
                self._container.get_blob_client(ref).set_blob_tags({self._tag.name: ACTIVE_TAG_VALUE})
            except ResourceNotFoundError as exc:
                raise ObjectNotFound(ref) from exc

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
        with storage_errors("blob read"):
            blob = self._container.get_blob_client(ref)
            try:
                downloader = blob.download_blob(etag=etag, match_condition=MatchConditions.IfNotModified)
            except ResourceNotFoundError as exc:
                raise ObjectNotFound(ref) from exc
            except ResourceModifiedError as exc:
                # A conditional read of an absent blob may also answer 412 (Azurite does): tell them apart.
                if not blob.exists():
                    raise ObjectNotFound(ref) from exc
                raise ObjectChanged(
                    "the stored object changed after it was registered (ETag differs)"
                ) from exc
            stored_type = downloader.properties.content_settings.content_type or ""
            if base_content_type(stored_type) != base_content_type(content_type):
                raise ObjectMismatch(
                    "content_type", "the stored object's content type differs from the registered one"
                )
            try:
                chunks = downloader.chunks()
                return spool_verified(
                    # Larger than one chunk: the next range is fetched while this one is verified and spooled.
                    read_ahead(chunks) if length > self._chunk_bytes else chunks,
                    expected_length=length,
                    expected_sha256=sha256,
                    content_type=content_type,
                    head_bytes=head_bytes,
                )
            except ResourceModifiedError as exc:  # changed between two range reads
                raise ObjectChanged("the stored object changed while it was being read") from exc

    def exists(self, ref: str) -> bool:
        with storage_errors("blob exists"):
            return bool(self._container.get_blob_client(ref).exists())

    def delete(self, ref: str) -> bool:
        with storage_errors("blob delete"):
            try:
                self._container.delete_blob(ref, delete_snapshots="include")
            except ResourceNotFoundError:
                return False
            return True

    def provisional_objects(self) -> Iterator[ProvisionalObject]:
        with storage_errors("blob tag search"):
            query = f"\"{self._tag.name}\"='{self._tag.value}'"
            for found in self._container.find_blobs_by_tags(query):
                try:
                    properties = self._container.get_blob_client(found.name).get_blob_properties()
                except ResourceNotFoundError:
                    continue  # deleted since the index answered
                yield ProvisionalObject(ref=found.name, created_at=properties.creation_time)
