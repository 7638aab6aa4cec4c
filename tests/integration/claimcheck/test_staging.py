"""The direct-upload staging adapter on Azurite: a write-only grant for one blob, a streamed read that
fails when the blob changes under it, and the sweep of staging blobs never committed."""

from __future__ import annotations

import io
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import BlobServiceClient
from claimcheck.adapters.staging import AzureBlobStagingArea
from claimcheck.blob_upload import UploadFailed, put_blocks
from claimcheck.integrity import read_up_to
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.uploads import GRANT_LIFETIME, STAGING_PREFIX, DirectUploads, UploadMismatch

BODY = b"0123456789" * 100_000  # 1 MB in 64 KiB blocks


@pytest.fixture
def staging(storage_connection_string: str) -> AzureBlobStagingArea:
    service = BlobServiceClient.from_connection_string(
        storage_connection_string, max_single_get_size=64 * 1024, max_chunk_get_size=64 * 1024
    )
    container = service.get_container_client(f"staging-{uuid.uuid4().hex[:12]}")
    container.create_container()
    return AzureBlobStagingArea(service, container)


def test_a_grant_writes_its_blob_and_the_app_reads_it_back_as_a_stream(staging: AzureBlobStagingArea) -> None:
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    assert put_blocks(url, io.BytesIO(BODY), block_bytes=64 * 1024, timeout=30)[0] == len(BODY)
    found = staging.properties(name)
    assert found is not None
    assert found.length == len(BODY)
    reader = staging.open(name, etag=found.etag)
    assert read_up_to(reader, 10) == BODY[:10]
    assert read_up_to(reader, len(BODY)) == BODY[10:]
    assert reader.read(1) == b""


def test_a_grant_cannot_read_and_an_expired_grant_cannot_write(staging: AzureBlobStagingArea) -> None:
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    put_blocks(url, io.BytesIO(b"abc"), block_bytes=3, timeout=30)
    # (urllib, not the SDK: the SDK's request log would print the URL, signature redacted)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=30)  # noqa: S310 - Azurite on loopback
    assert refused.value.code == 403
    expired = staging.grant_write(name, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(UploadFailed) as failed:
        put_blocks(expired, io.BytesIO(b"abc"), block_bytes=3, timeout=30, attempts=1)
    assert failed.value.status == 403
    assert "sig=" not in str(failed.value)
    assert failed.value.__cause__ is None
    assert failed.value.__context__ is None


def test_a_blob_replaced_after_its_properties_were_read_is_not_read(staging: AzureBlobStagingArea) -> None:
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    put_blocks(url, io.BytesIO(BODY), block_bytes=64 * 1024, timeout=30)
    found = staging.properties(name)
    assert found is not None
    put_blocks(url, io.BytesIO(BODY[::-1]), block_bytes=64 * 1024, timeout=30)
    with pytest.raises(UploadMismatch):
        read_up_to(staging.open(name, etag=found.etag), len(BODY))


@pytest.mark.parametrize("removed", ["blob", "container"])
def test_an_upload_removed_while_it_is_read_is_the_vanished_upload_answer(
    staging: AzureBlobStagingArea, storage_connection_string: str, removed: str
) -> None:
    """Removed between two range reads. Azurite answers the next ETag-conditional GET of a deleted blob
    412 (ResourceModifiedError), Azure can answer 404 BlobNotFound; Azurite's 404 here is the container's
    (ContainerNotFound), the same ResourceNotFoundError. Before the fix a 404 left the reader as
    StorageFailed (a 500 at the commit) instead of the 422 upload_mismatch of an upload that vanished."""
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    put_blocks(url, io.BytesIO(BODY), block_bytes=64 * 1024, timeout=30)
    found = staging.properties(name)
    assert found is not None
    reader = staging.open(name, etag=found.etag)
    assert read_up_to(reader, 64 * 1024) == BODY[: 64 * 1024]  # the first range read only
    if removed == "blob":
        assert staging.delete(name)
    else:
        container = staging._container.container_name  # the fixture's own container
        BlobServiceClient.from_connection_string(storage_connection_string).delete_container(container)
    with pytest.raises(UploadMismatch) as vanished:
        read_up_to(reader, len(BODY))
    assert (vanished.value.code, vanished.value.http_status) == ("upload_mismatch", 422)
    assert "http" not in str(vanished.value)  # no URL in what reaches the caller


def test_the_sweep_removes_staging_blobs_never_committed(staging: AzureBlobStagingArea) -> None:
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    put_blocks(url, io.BytesIO(b"abandoned"), block_bytes=1024, timeout=30)
    grace = timedelta(hours=1)
    uploads = DirectUploads(
        staging,
        purposes=DEFAULT_PURPOSES,
        max_bytes=1 << 20,
        orphan_grace=grace,
        clock=lambda: datetime.now(UTC),
    )
    assert uploads.sweep() == []  # its grant may still be in use
    assert uploads.sweep(datetime.now(UTC) + GRANT_LIFETIME + grace + timedelta(minutes=1)) == [name]
    assert staging.properties(name) is None


@pytest.mark.parametrize(
    ("operation", "headers"),
    [("snapshot", {}), ("lease", {"x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1"})],
)
def test_a_snapshot_or_lease_taken_through_the_grant_does_not_keep_the_staging_blob(
    staging: AzureBlobStagingArea, operation: str, headers: dict[str, str]
) -> None:
    """Found by review: a grant's write permission also lets its holder snapshot or lease the blob, after
    which every delete of the app failed (409 SnapshotsPresent, 412 LeaseIdMissing): neither the commit's
    discard nor the sweep could ever remove it. Both remove it, snapshots included."""
    name = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    url = staging.grant_write(name, expires_at=datetime.now(UTC) + timedelta(minutes=5))
    put_blocks(url, io.BytesIO(b"kept?"), block_bytes=1024, timeout=30)
    taken = urllib.request.Request(  # noqa: S310 - Azurite on loopback
        f"{url}&comp={operation}", data=b"", method="PUT", headers={"x-ms-version": "2021-12-02", **headers}
    )
    with urllib.request.urlopen(taken, timeout=30) as answer:  # noqa: S310 - Azurite on loopback
        assert answer.status == 201
    uploads = DirectUploads(
        staging,
        purposes=DEFAULT_PURPOSES,
        max_bytes=1 << 20,
        orphan_grace=timedelta(0),
        clock=lambda: datetime.now(UTC),
    )
    assert uploads.sweep(datetime.now(UTC) + GRANT_LIFETIME + timedelta(minutes=1)) == [name]
    container = staging._container  # the test looks behind the port for snapshots
    assert list(container.list_blobs(name_starts_with=name, include=["snapshots"])) == []
