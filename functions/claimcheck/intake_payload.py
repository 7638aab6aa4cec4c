"""The bytes of one intake before they are stored: what is already read (the head, a whole small
payload with its sha256), and the store's refusals as the caller's answers."""

from __future__ import annotations

import io
from collections.abc import Mapping

from claimcheck.errors import (
    EmptyPayload,
    ForbiddenContentType,
    IntakeRejected,
    ObjectEmpty,
    ObjectMismatch,
    ObjectTooLarge,
    PayloadStoreError,
    PayloadTooLarge,
)
from claimcheck.integrity import DEFAULT_CHUNK_BYTES, Hashed, Readable, check_declared_type, read_up_to
from claimcheck.policy import check_length


def whole_if_small(stream: Readable, content_type: str, max_payload_bytes: int) -> Readable | Hashed:
    """The whole payload in memory with its sha256 when it fits in one chunk (the upload would hold that
    chunk in memory anyway), checked as intake checks it; else the stream, nothing of it lost."""
    head = read_up_to(stream, DEFAULT_CHUNK_BYTES + 1)
    if len(head) > DEFAULT_CHUNK_BYTES:
        return Prefixed(head, stream)
    check_length(len(head), max_payload_bytes)
    check_type(content_type, head)
    return Hashed.of(head)


class Prefixed(io.RawIOBase):
    """Bytes already read (to decide inline vs reference) followed by the rest of the source."""

    def __init__(self, head: bytes, rest: Readable) -> None:
        super().__init__()
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            taken = self._head if size < 0 else self._head[:size]
            self._head = self._head[len(taken) :]
            return taken
        return self._rest.read(size)


# The payload store's refusals at intake, as the caller's answer (the leaf carries code and HTTP status).
# Bytes that cannot be of the declared type are refused like a forbidden type.
INTAKE_ANSWERS: Mapping[type[PayloadStoreError], type[IntakeRejected]] = {
    ObjectTooLarge: PayloadTooLarge,
    ObjectEmpty: EmptyPayload,
    ObjectMismatch: ForbiddenContentType,  # only the content type is checked while writing
}


def intake_answer(error: PayloadStoreError) -> Exception:
    """The ``IntakeRejected`` leaf for a store refusal; any other store error is not the caller's
    doing and stays what it is (a write-once collision of a fresh random reference, say)."""
    answer = INTAKE_ANSWERS.get(type(error))
    return error if answer is None else answer(str(error))


def check_type(content_type: str, head: bytes) -> None:
    try:
        check_declared_type(content_type, head)
    except PayloadStoreError as exc:
        raise intake_answer(exc) from exc
