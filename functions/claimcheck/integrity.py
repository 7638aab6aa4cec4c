"""Hash and count bytes in the same pass as the transfer, with memory bounded by the chunk size."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from claimcheck.errors import ObjectMismatch, ObjectTooLarge
from claimcheck.policy import base_content_type

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024
# Verified payloads up to this size stay in memory; larger ones roll over to a temporary file.
SPOOL_MEMORY_BYTES = 8 * 1024 * 1024


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def read_up_to(source: Readable, size: int) -> bytes:
    """Read until ``size`` bytes or the end, looping over short reads (pipes and sockets return less)."""
    parts: list[bytes] = []
    remaining = size
    while remaining > 0 and (part := source.read(remaining)):
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


@dataclass(frozen=True)
class Hashed:
    """A whole payload already in memory (at most one chunk) with its sha256, hashed once by whoever
    read it: its length and sha256 are known before any request, so the registry record can be written
    while the bytes upload, and the store does not hash them a second time."""

    data: bytes
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> Hashed:
        return cls(data, hashlib.sha256(data).hexdigest())

    @property
    def length(self) -> int:
        return len(self.data)

    @property
    def head(self) -> bytes:
        """The first bytes, as ``HashingReader.head`` keeps them for the content-type check."""
        return self.data[:_SNIFF_BYTES]


class HashingReader:
    """Wraps a source; every byte read through it is counted and hashed, and a limit is enforced.

    The upload reads through this wrapper, so sha256 and length come out of the upload pass itself:
    no second read of the source, no copy in memory.
    """

    def __init__(self, source: Readable, *, max_bytes: int) -> None:
        self._source = source
        self._max_bytes = max_bytes
        self._digest = hashlib.sha256()
        self.length = 0
        self.head = b""  # the first bytes, kept for the content-type check

    def read(self, size: int = -1) -> bytes:
        chunk = self._source.read(size)
        if chunk:
            self.length += len(chunk)
            if self.length > self._max_bytes:
                raise ObjectTooLarge(self._max_bytes)
            if len(self.head) < _SNIFF_BYTES:
                self.head += chunk[: _SNIFF_BYTES - len(self.head)]
            self._digest.update(chunk)
        return chunk

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


_SNIFF_BYTES = 1024


def check_declared_type(content_type: str, head: bytes) -> None:
    """Cheap magic-number check that the first bytes can be of the declared type."""
    kind = base_content_type(content_type)
    if kind == "application/pdf" and not head.startswith(b"%PDF-"):
        raise ObjectMismatch(
            "content_type", "declared application/pdf, but the bytes do not start with a PDF header"
        )
    if kind.startswith("text/") and b"\x00" in head:
        raise ObjectMismatch("content_type", f"declared {kind}, but the bytes contain NUL characters")


def spool_verified(
    chunks: Iterable[bytes],
    *,
    expected_length: int,
    expected_sha256: str,
    content_type: str,
    memory_bytes: int = SPOOL_MEMORY_BYTES,
    head_bytes: int | None = None,
) -> BinaryIO:
    """Copy ``chunks`` into a bounded spool while checking length, sha256 and declared type.

    ``head_bytes`` (an analyzer's ``reads_leading_bytes``) keeps only the object's first ``head_bytes``
    bytes; every byte is still counted and hashed, so the kept head is handed out only once the whole
    object is verified. None keeps the whole object.

    Returns the spool rewound to 0; only fully verified bytes are handed out. Raises
    ``ObjectMismatch`` naming the field (and closes the spool) otherwise.
    """
    spool = tempfile.SpooledTemporaryFile(max_size=memory_bytes)  # noqa: SIM115 - returned to the caller
    keep = expected_length if head_bytes is None else head_bytes
    try:
        digest = hashlib.sha256()
        length = 0
        head = b""
        for chunk in chunks:
            length += len(chunk)
            if length > expected_length:
                raise ObjectMismatch(
                    "length", f"the stored object is longer than the recorded {expected_length} B"
                )
            if len(head) < _SNIFF_BYTES:
                head += chunk[: _SNIFF_BYTES - len(head)]
            digest.update(chunk)
            start = length - len(chunk)  # this chunk's offset in the object
            if start < keep:
                spool.write(chunk[: keep - start] if length > keep else chunk)
        if length != expected_length:
            raise ObjectMismatch(
                "length", f"the stored object has {length} bytes, the record says {expected_length}"
            )
        if digest.hexdigest() != expected_sha256:
            raise ObjectMismatch(
                "sha256", "the sha256 of the stored object differs from the recorded checksum"
            )
        check_declared_type(content_type, head)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool  # type: ignore[return-value]  # SpooledTemporaryFile implements the BinaryIO protocol
