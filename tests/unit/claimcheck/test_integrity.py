"""Integrity: hashing in the transfer pass and verified spooling."""

from __future__ import annotations

import hashlib
import io

import pytest
from claimcheck.errors import ObjectMismatch, ObjectTooLarge
from claimcheck.integrity import HashingReader, spool_verified


def test_hashing_reader_hashes_what_passes_through() -> None:
    """Reading through the wrapper yields the source's sha256 and length."""
    data = b"x" * 10_000
    reader = HashingReader(io.BytesIO(data), max_bytes=20_000)
    while reader.read(1024):
        pass
    assert (reader.length, reader.sha256) == (10_000, hashlib.sha256(data).hexdigest())


def test_hashing_reader_stops_at_the_limit() -> None:
    """A source longer than the limit raises ObjectTooLarge during the read."""
    reader = HashingReader(io.BytesIO(b"x" * 101), max_bytes=100)
    reader.read(50)
    reader.read(50)
    with pytest.raises(ObjectTooLarge):
        reader.read(50)


def test_spool_returns_verified_bytes_rewound() -> None:
    """Matching chunks come back as a readable spool positioned at 0."""
    data = b"hello world"
    spool = spool_verified(
        [data[:5], data[5:]],
        expected_length=len(data),
        expected_sha256=hashlib.sha256(data).hexdigest(),
        content_type="text/plain",
    )
    assert spool.read() == data


@pytest.mark.parametrize(
    ("chunks", "field"),
    [
        ([b"hello worlD"], "sha256"),
        ([b"hello"], "length"),
        ([b"hello world", b"!"], "length"),
    ],
)
def test_spool_refuses_tampered_bytes(chunks: list[bytes], field: str) -> None:
    """Different bytes, fewer bytes or more bytes than recorded raise ObjectMismatch naming the field."""
    with pytest.raises(ObjectMismatch) as caught:
        spool_verified(
            chunks,
            expected_length=11,
            expected_sha256=hashlib.sha256(b"hello world").hexdigest(),
            content_type="text/plain",
        )
    assert caught.value.field == field


def test_spool_checks_declared_type() -> None:
    """Bytes that cannot be a PDF are refused when the declared type is application/pdf."""
    data = b"not a pdf"
    with pytest.raises(ObjectMismatch, match="PDF header"):
        spool_verified(
            [data],
            expected_length=len(data),
            expected_sha256=hashlib.sha256(data).hexdigest(),
            content_type="application/pdf",
        )


def test_a_kept_head_is_the_first_bytes_of_the_verified_object() -> None:
    """``head_bytes`` keeps exactly the first bytes, across chunk boundaries; a larger one keeps all."""
    data = b"0123456789" * 10
    chunks = [data[start : start + 7] for start in range(0, len(data), 7)]
    for head_bytes, kept in [(1, data[:1]), (7, data[:7]), (23, data[:23]), (1000, data)]:
        spool = spool_verified(
            chunks,
            expected_length=len(data),
            expected_sha256=hashlib.sha256(data).hexdigest(),
            content_type="text/plain",
            head_bytes=head_bytes,
        )
        assert spool.read() == kept


@pytest.mark.parametrize(
    ("chunks", "field"),
    [
        ([b"hello", b" worlD"], "sha256"),
        ([b"hello", b" worl"], "length"),
        ([b"hello", b" world", b"!"], "length"),
    ],
)
def test_a_kept_head_is_refused_when_the_rest_differs(chunks: list[bytes], field: str) -> None:
    """Keeping only the head verifies every byte all the same: a difference past it is refused."""
    with pytest.raises(ObjectMismatch) as caught:
        spool_verified(
            chunks,
            expected_length=11,
            expected_sha256=hashlib.sha256(b"hello world").hexdigest(),
            content_type="text/plain",
            head_bytes=5,
        )
    assert caught.value.field == field
