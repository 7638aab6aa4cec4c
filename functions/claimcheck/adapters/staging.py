"""Azure Blob adapter of the direct-upload ``StagingArea`` port (claimcheck.uploads).

Grants are blob SAS tokens with the write permission only, for one blob, starting a few minutes in the
past (clock skew) and ending at the grant's expiry. With a token credential (Azure) they are *user
delegation* SAS: the key comes from Get User Delegation Key with the app's managed identity (Storage
Blob Delegator), and the SAS can never do more than that identity's own roles on the container allow.
With an account key (only Azurite's public development key: the stack disables shared keys) the SAS is
a service SAS signed with it.

Reads stream the blob chunk by chunk (the client's ``max_chunk_get_size``), conditioned on the ETag
the commit saw, so bytes replaced or deleted while the commit reads them fail the read (``UploadMismatch``)
instead of being copied.
Other SDK errors leave as ``StorageUnavailable`` or ``StorageFailed`` (adapters/sdk_errors.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError
from azure.storage.blob import (
    BlobLeaseClient,
    BlobSasPermissions,
    StorageErrorCode,
    UserDelegationKey,
    generate_blob_sas,
)

from claimcheck.adapters.sdk_errors import storage_errors
from claimcheck.uploads import STAGING_PREFIX, StagedObject, UploadMismatch

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ContainerClient

# Tolerance for a storage front end whose clock runs behind ours.
CLOCK_SKEW = timedelta(minutes=5)
# A user delegation key is valid up to seven days; one key signs the grants of a day.
DELEGATION_KEY_LIFETIME = timedelta(days=1)
# SDK retries of Get User Delegation Key within one grant request (see _delegation_key).
DELEGATION_KEY_RETRIES = 0


class AzureBlobStagingArea:
    def __init__(self, service: BlobServiceClient, container: ContainerClient) -> None:
        self._service = service
        self._container = container
        self._key: UserDelegationKey | None = None
        self._key_expiry: datetime | None = None
        self._lock = threading.Lock()

    def grant_write(self, name: str, *, expires_at: datetime) -> str:
        blob = self._container.get_blob_client(name)
        start = datetime.now(expires_at.tzinfo) - CLOCK_SKEW
        signing: dict[str, object] = {}
        account_key = getattr(self._service.credential, "account_key", None)
        if isinstance(account_key, str):
            signing["account_key"] = account_key
        else:
            signing["user_delegation_key"] = self._delegation_key(start, expires_at)
        sas = generate_blob_sas(
            account_name=str(self._service.account_name),
            container_name=self._container.container_name,
            blob_name=name,
            permission=BlobSasPermissions(write=True),
            start=start,
            expiry=expires_at,
            protocol="https" if blob.url.startswith("https://") else "https,http",
            **signing,  # type: ignore[arg-type]
        )
        return f"{blob.url}?{sas}"

    def _delegation_key(self, start: datetime, expires_at: datetime) -> UserDelegationKey:
        with self._lock:
            if self._key is None or self._key_expiry is None or self._key_expiry < expires_at:
                self._key_expiry = expires_at + DELEGATION_KEY_LIFETIME
                with storage_errors("user delegation key"):
                    # One attempt: the SDK's default retries (backoff from 15 s) held a grant request
                    # 87 s before its 503 while storage was unreachable; the caller asks again after
                    # Retry-After instead (ClaimCheckClient does). The key is then cached for a day.
                    self._key = self._service.get_user_delegation_key(
                        start, self._key_expiry, retry_total=DELEGATION_KEY_RETRIES
                    )
            return self._key

    def properties(self, name: str) -> StagedObject | None:
        with storage_errors("staging properties"):
            try:
                found = self._container.get_blob_client(name).get_blob_properties()
            except ResourceNotFoundError:
                return None
        return StagedObject(name, int(found.size), str(found.etag), found.creation_time)

    def open(self, name: str, *, etag: str) -> _ChunkReader:
        blob = self._container.get_blob_client(name)
        with storage_errors("staging read"):
            try:
                downloader = blob.download_blob(etag=etag, match_condition=MatchConditions.IfNotModified)
            except (ResourceModifiedError, ResourceNotFoundError) as exc:
                raise UploadMismatch(
                    "the uploaded object changed or vanished before it could be read"
                ) from exc
        return _ChunkReader(downloader.chunks())

    def delete(self, name: str) -> bool:
        """Remove the blob with its snapshots, breaking a lease first: the grant's write permission lets
        its holder snapshot or lease the blob, and neither may keep it from the commit or the sweep."""
        blob = self._container.get_blob_client(name)
        with storage_errors("staging delete"):
            try:
                try:
                    blob.delete_blob(delete_snapshots="include")
                except HttpResponseError as exc:
                    if getattr(exc, "error_code", None) != StorageErrorCode.LEASE_ID_MISSING:
                        raise
                    BlobLeaseClient(blob).break_lease(lease_break_period=0)
                    blob.delete_blob(delete_snapshots="include")
            except ResourceNotFoundError:
                return False
        return True

    def staged(self) -> Iterator[StagedObject]:
        with storage_errors("staging list"):
            for found in self._container.list_blobs(name_starts_with=STAGING_PREFIX):
                yield StagedObject(found.name, int(found.size), str(found.etag), found.creation_time)


class _ChunkReader:
    """``read(size)`` over the downloader's chunk iterator, holding at most one chunk."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def read(self, size: int = -1, /) -> bytes:
        if not self._pending:
            with storage_errors("staging read"):
                try:
                    chunk = next(self._chunks, None)
                except (ResourceModifiedError, ResourceNotFoundError) as exc:
                    # Replaced (412) or deleted (404: the conditional GET of a blob that is gone) between
                    # two range reads: the same answer as a blob that vanished before the first one.
                    raise UploadMismatch(
                        "the uploaded object changed or vanished while it was being read"
                    ) from exc
            if chunk is None:
                return b""
            self._pending = chunk
        if size < 0 or size >= len(self._pending):
            taken, self._pending = self._pending, b""
        else:
            taken, self._pending = self._pending[:size], self._pending[size:]
        return taken
