"""Direct upload of large documents (issue 14): a write-only grant for one staging blob, then a commit.

The platform caps an HTTP request to a Function App at 100 MB (104,857,600 bytes; "Limits" of the
Azure Functions HTTP trigger reference), far below ``Settings.max_payload_bytes`` (2 GiB). So a large
document never travels through the Functions front end:

1. ``POST /api/uploads`` (same bearer token, access table and intake policy as ``POST /api/documents``,
   with the declared length) answers a grant: an upload id and a URL carrying a short-lived, write-only
   SAS for exactly one staging blob (``uploads/<digest>`` in the payload container). On Azure the SAS
   is a *user delegation* SAS signed with a key the app's managed identity obtained (no account key
   exists); locally Azurite's development account key signs it.
2. The client puts the bytes straight to Blob Storage (Put Block / Put Block List).
3. ``POST /api/uploads/{id}/commit`` with the declared length and sha256: the staging blob is read as a
   stream (ETag-conditioned, memory bounded by one chunk) through ``VerifyingReader`` into the ordinary
   producer path, so the stored object is the server's own write-once copy (the client's grant never
   covers it), hashed in the same pass. A length or sha256 that differs from the declaration raises at
   the end of the stream, before the copy is committed: nothing is registered or published.

The staging name is a digest of the caller, the tenant and the upload id, so another caller's commit of
a leaked upload id finds nothing. A staging blob that is never committed is reclaimed by
``DirectUploads.sweep`` (reconciliation timer) once its grant has expired plus the orphan grace, and
by the storage lifecycle rule on the ``uploads/`` prefix as the backstop.

Grant URLs are secrets: they are returned to the caller once and never logged, raised or published.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from claimcheck.errors import ClaimCheckError
from claimcheck.integrity import Readable
from claimcheck.policy import PurposePolicy, check_intake

log = logging.getLogger(__name__)

STAGING_PREFIX = "uploads/"
# How long a grant lets the client write: enough for 2 GiB over a slow link, short enough to be a grant.
GRANT_LIFETIME = timedelta(hours=1)
# The block size a client should put (Put Block): bounded memory on the client, 50,000 blocks ≫ 2 GiB.
BLOCK_BYTES = 8 * 1024 * 1024
UPLOAD_ID = re.compile(r"up_[A-Za-z0-9_-]{27}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
LENGTH = re.compile(r"[0-9]{1,19}")

# The request headers of the two routes besides intake's metadata headers (claimcheck.http_api).
UPLOAD_CONTENT_TYPE = "x-upload-content-type"
UPLOAD_LENGTH = "x-upload-length"
UPLOAD_SHA256 = "x-upload-sha256"


class UploadRefused(ClaimCheckError):
    """A grant or commit the API refuses; ``code`` is the JSON ``error``, ``http_status`` the status."""

    code = "invalid_upload"
    http_status = 400

    def __init__(self, message: str, *, code: str | None = None, http_status: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status


class UploadNotFound(UploadRefused):
    code = "upload_not_found"
    http_status = 404


class UploadMismatch(UploadRefused):
    """The staged bytes are not what the commit declared (length or sha256)."""

    code = "upload_mismatch"
    http_status = 422


@dataclass(frozen=True)
class StagedObject:
    name: str
    length: int
    etag: str
    created_at: datetime


class StagingArea(Protocol):
    """Staging blobs a client writes through a grant, read back and removed by the app."""

    def grant_write(self, name: str, *, expires_at: datetime) -> str:
        """A URL that lets its holder write exactly ``name`` until ``expires_at`` (and nothing else)."""
        ...

    def properties(self, name: str) -> StagedObject | None: ...

    def open(self, name: str, *, etag: str) -> Readable:
        """Stream the blob as it was at ``etag``; a change while reading raises."""
        ...

    def delete(self, name: str) -> bool: ...

    def staged(self) -> Iterator[StagedObject]: ...


@dataclass(frozen=True)
class UploadGrant:
    upload_id: str
    upload_url: str
    expires_at: datetime
    max_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "upload_id": self.upload_id,
            "upload_url": self.upload_url,
            "expires_at": self.expires_at.isoformat().replace("+00:00", "Z"),
            "max_bytes": self.max_bytes,
            "block_bytes": BLOCK_BYTES,
            "commit_url": f"/api/uploads/{self.upload_id}/commit",
        }

    def __repr__(self) -> str:  # the URL is a secret: never in a repr that may reach a log
        return f"UploadGrant(upload_id={self.upload_id!r}, expires_at={self.expires_at!r})"


@dataclass(frozen=True)
class Declared:
    """What an upload request declares about the document besides intake's metadata."""

    content_type: str
    length: int
    sha256: str | None


def read_declared(headers: Mapping[str, str], *, need_sha256: bool) -> Declared:
    """``X-Upload-Content-Type``, ``X-Upload-Length`` and (for a commit) ``X-Upload-Sha256``."""
    lowered = {name.lower(): value.strip() for name, value in headers.items()}
    raw_length = lowered.get(UPLOAD_LENGTH, "")
    if not LENGTH.fullmatch(raw_length) or int(raw_length) == 0:
        raise UploadRefused("X-Upload-Length must be the document's length in bytes (a positive integer)")
    sha256 = lowered.get(UPLOAD_SHA256, "").lower() or None
    if sha256 is not None and not SHA256_HEX.fullmatch(sha256):
        raise UploadRefused("X-Upload-Sha256 must be the document's sha256 as 64 hexadecimal digits")
    if need_sha256 and sha256 is None:
        raise UploadRefused("X-Upload-Sha256 is required to commit an upload")
    return Declared(lowered.get(UPLOAD_CONTENT_TYPE, ""), int(raw_length), sha256)


def check_upload_id(value: str) -> str:
    if not UPLOAD_ID.fullmatch(value):
        raise UploadNotFound("no such upload")
    return value


def staging_name(upload_id: str, *, scope: str, tenant_id: str) -> str:
    """The staging blob of an upload, bound to who asked for it and for which tenant."""
    digest = hashlib.sha256(f"upload\x1f{scope}\x1f{tenant_id}\x1f{upload_id}".encode()).hexdigest()
    return STAGING_PREFIX + digest


class VerifyingReader:
    """Reads the staged bytes once, counting and hashing them; at the end (or past the declared length)
    a difference raises ``UploadMismatch``, so a consumer of this reader never completes with bytes
    other than the declared ones."""

    def __init__(self, source: Readable, *, length: int, sha256: str) -> None:
        self._source = source
        self._length = length
        self._sha256 = sha256
        self._digest = hashlib.sha256()
        self._read = 0

    def read(self, size: int = -1, /) -> bytes:
        chunk = self._source.read(size)
        if chunk:
            self._read += len(chunk)
            if self._read > self._length:
                raise UploadMismatch(f"the uploaded object is longer than the declared {self._length} bytes")
            self._digest.update(chunk)
        elif size != 0:
            if self._read != self._length:
                raise UploadMismatch(f"the uploaded object has {self._read} bytes, {self._length} declared")
            if self._digest.hexdigest() != self._sha256:
                raise UploadMismatch("the sha256 of the uploaded object differs from the declared one")
        return chunk


class DirectUploads:
    def __init__(
        self,
        staging: StagingArea,
        *,
        purposes: Mapping[str, PurposePolicy],
        max_bytes: int,
        orphan_grace: timedelta,
        clock: Callable[[], datetime],
        lifetime: timedelta = GRANT_LIFETIME,
    ) -> None:
        self._staging = staging
        self._purposes = purposes
        self._max_bytes = max_bytes
        self._orphan_grace = orphan_grace
        self._clock = clock
        self._lifetime = lifetime

    def check(self, fields: Mapping[str, Any], declared: Declared) -> None:
        """Intake's own policy for the declared document (``IntakeRejected`` leaves: 400, 413, 415),
        before anything is granted: a grant is never issued for what a commit would refuse."""
        check_intake(
            self._purposes,
            tenant_id=str(fields.get("tenant_id", "")),
            purpose=str(fields.get("purpose", "")),
            classification=str(fields.get("classification", "")),
            content_type=declared.content_type,
            declared_length=declared.length,
            max_payload_bytes=self._max_bytes,
        )

    def grant(self, *, scope: str, tenant_id: str) -> UploadGrant:
        """A fresh upload id and its write-only grant (the caller checked identity and policy first)."""
        upload_id = "up_" + secrets.token_urlsafe(20)
        expires_at = self._clock() + self._lifetime
        name = staging_name(upload_id, scope=scope, tenant_id=tenant_id)
        url = self._staging.grant_write(name, expires_at=expires_at)
        log.info("upload %s granted until %s", upload_id, expires_at.isoformat())
        return UploadGrant(upload_id, url, expires_at, self._max_bytes)

    def open_staged(
        self, upload_id: str, *, scope: str, tenant_id: str, declared: Declared
    ) -> tuple[str, VerifyingReader]:
        """The staging blob's name and a verifying stream of it; refused if absent or of another size."""
        if declared.sha256 is None:
            raise UploadRefused("X-Upload-Sha256 is required to commit an upload")
        name = staging_name(check_upload_id(upload_id), scope=scope, tenant_id=tenant_id)
        staged = self._staging.properties(name)
        if staged is None:
            raise UploadNotFound(f"no upload {upload_id} for this caller and tenant (expired, or committed)")
        if staged.length != declared.length:
            raise UploadMismatch(f"the uploaded object has {staged.length} bytes, {declared.length} declared")
        reader = VerifyingReader(
            self._staging.open(name, etag=staged.etag), length=declared.length, sha256=declared.sha256
        )
        return name, reader

    def discard(self, name: str) -> None:
        """Remove a committed staging blob; a failure only leaves it to the sweep."""
        try:
            self._staging.delete(name)
        except ClaimCheckError as exc:  # storage failed (adapters/sdk_errors.py)
            log.warning("staging object not removed (%s); the reconciliation sweep will", type(exc).__name__)

    def sweep(self, now: datetime | None = None) -> list[str]:
        """Remove staging blobs whose grant has expired and whose commit window (orphan grace) is over."""
        now = now or self._clock()
        removed: list[str] = []
        for staged in self._staging.staged():
            if now < staged.created_at + self._lifetime + self._orphan_grace:
                continue
            try:
                if self._staging.delete(staged.name):
                    removed.append(staged.name)
            except ClaimCheckError as exc:  # storage failed on this one: the others go on
                log.warning("staging object not removed (%s); retried next run", type(exc).__name__)
        log.info("upload sweep finished uncommitted_removed=%d", len(removed))
        return removed
