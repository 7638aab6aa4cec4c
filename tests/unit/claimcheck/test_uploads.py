"""claimcheck.uploads: declared values, the verifying reader, the binding of an upload to its caller and
tenant, and the sweep of staging blobs never committed (a fake staging area; Azurite in integration)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from claimcheck.errors import PayloadTooLarge
from claimcheck.integrity import read_up_to
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.uploads import (
    GRANT_LIFETIME,
    STAGING_PREFIX,
    Declared,
    DirectUploads,
    StagedObject,
    UploadMismatch,
    UploadNotFound,
    UploadRefused,
    VerifyingReader,
    read_declared,
    staging_name,
)

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
GRACE = timedelta(hours=1)
DOCUMENT = b"clause 1. The supplier delivers.\n" * 1000
SHA = hashlib.sha256(DOCUMENT).hexdigest()


class FakeStaging:
    def __init__(self) -> None:
        self.blobs: dict[str, tuple[bytes, datetime]] = {}
        self.granted: list[tuple[str, datetime]] = []

    def grant_write(self, name: str, *, expires_at: datetime) -> str:
        self.granted.append((name, expires_at))
        return f"https://storage.invalid/payloads/{name}?sig=secret"

    def properties(self, name: str) -> StagedObject | None:
        if name not in self.blobs:
            return None
        data, created = self.blobs[name]
        return StagedObject(name, len(data), '"etag"', created)

    def open(self, name: str, *, etag: str) -> io.BytesIO:
        return io.BytesIO(self.blobs[name][0])

    def delete(self, name: str) -> bool:
        return self.blobs.pop(name, None) is not None

    def staged(self) -> Iterator[StagedObject]:
        for name in list(self.blobs):
            found = self.properties(name)
            assert found is not None
            yield found


def _uploads(staging: FakeStaging) -> DirectUploads:
    return DirectUploads(
        staging, purposes=DEFAULT_PURPOSES, max_bytes=1 << 20, orphan_grace=GRACE, clock=lambda: NOW
    )


def _read_all(reader: VerifyingReader, chunk: int = 4096) -> bytes:
    parts = []
    while part := read_up_to(reader, chunk):
        parts.append(part)
    return b"".join(parts)


def test_the_verifying_reader_passes_exactly_the_declared_bytes() -> None:
    assert _read_all(VerifyingReader(io.BytesIO(DOCUMENT), length=len(DOCUMENT), sha256=SHA)) == DOCUMENT


@pytest.mark.parametrize(
    ("data", "length"),
    [(DOCUMENT[:-1] + b"X", len(DOCUMENT)), (DOCUMENT, len(DOCUMENT) - 1), (DOCUMENT[:-1], len(DOCUMENT))],
    ids=["other bytes", "longer than declared", "shorter than declared"],
)
def test_the_verifying_reader_refuses_at_the_end_of_other_bytes(data: bytes, length: int) -> None:
    with pytest.raises(UploadMismatch):
        _read_all(VerifyingReader(io.BytesIO(data), length=length, sha256=SHA))


def test_declared_values_are_strict() -> None:
    declared = read_declared(
        {"X-Upload-Length": "12", "X-Upload-Sha256": SHA.upper(), "X-Upload-Content-Type": "text/plain"},
        need_sha256=True,
    )
    assert declared == Declared("text/plain", 12, SHA)
    for headers in ({"X-Upload-Length": "0"}, {"X-Upload-Length": "1e3"}, {"X-Upload-Length": "-1"}, {}):
        with pytest.raises(UploadRefused, match="X-Upload-Length"):
            read_declared(headers, need_sha256=False)
    with pytest.raises(UploadRefused, match="X-Upload-Sha256"):
        read_declared({"X-Upload-Length": "12"}, need_sha256=True)
    with pytest.raises(UploadRefused, match="X-Upload-Sha256"):
        read_declared({"X-Upload-Length": "12", "X-Upload-Sha256": "z" * 64}, need_sha256=False)


def test_an_upload_is_bound_to_its_caller_and_tenant() -> None:
    staging = FakeStaging()
    uploads = _uploads(staging)
    grant = uploads.grant(scope="dir/alice", tenant_id="acme")
    assert grant.expires_at == NOW + GRANT_LIFETIME
    assert "sig=" not in repr(grant)
    ((name, _),) = staging.granted
    assert name == staging_name(grant.upload_id, scope="dir/alice", tenant_id="acme")
    assert name.startswith(STAGING_PREFIX)
    assert grant.upload_id not in name  # the staging name does not reveal the id
    staging.blobs[name] = (DOCUMENT, NOW)
    declared = Declared("text/plain", len(DOCUMENT), SHA)
    for scope, tenant in (("dir/mallory", "acme"), ("dir/alice", "globex")):
        with pytest.raises(UploadNotFound):
            uploads.open_staged(grant.upload_id, scope=scope, tenant_id=tenant, declared=declared)
    with pytest.raises(UploadMismatch):
        uploads.open_staged(
            grant.upload_id, scope="dir/alice", tenant_id="acme", declared=Declared("text/plain", 5, SHA)
        )
    found, reader = uploads.open_staged(
        grant.upload_id, scope="dir/alice", tenant_id="acme", declared=declared
    )
    assert (found, _read_all(reader)) == (name, DOCUMENT)
    with pytest.raises(UploadNotFound):
        uploads.open_staged("../etc", scope="dir/alice", tenant_id="acme", declared=declared)


def test_a_grant_is_refused_for_what_intake_would_refuse() -> None:
    uploads = _uploads(FakeStaging())
    fields = {"tenant_id": "acme", "purpose": "contract-review", "classification": "internal"}
    uploads.check(fields, Declared("text/plain", 10, None))
    with pytest.raises(PayloadTooLarge):
        uploads.check(fields, Declared("text/plain", (1 << 20) + 1, None))


def test_the_sweep_removes_only_staging_blobs_past_their_grant_and_the_grace() -> None:
    staging = FakeStaging()
    staging.blobs = {
        f"{STAGING_PREFIX}old": (b"x", NOW - GRANT_LIFETIME - GRACE),
        f"{STAGING_PREFIX}young": (b"x", NOW - GRANT_LIFETIME - GRACE + timedelta(seconds=1)),
    }
    assert _uploads(staging).sweep() == [f"{STAGING_PREFIX}old"]
    assert list(staging.blobs) == [f"{STAGING_PREFIX}young"]
