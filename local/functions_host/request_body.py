"""How the local host reads request bodies, bounded by its body limit (``max_body_bytes``).

- A ``Content-Length`` within the limit: read in full before the function runs (as the Functions host
  hands the worker the whole body). Over the limit: nothing of it is read; the function gets the headers
  and an ``UnreadBodyRequest``, so it can refuse from them (intake answers ``use_direct_upload``), and
  asking for the body raises ``RequestTooLarge``, which the host answers with its own 413.
- Chunked: read up to the limit and refused (``RequestTooLarge``) before the chunk that would cross it.
- A body that ends before its ``Content-Length`` (or inside a chunk), Content-Length headers that differ,
  or a transfer coding other than chunked alone are refused (400), never read by a guess.
- ``Expect: 100-continue`` over the limit: no 100 is sent, so the client never sends the body.
- After answering a request whose body was left unread, the rest is read and dropped, a slice at a time
  and bounded in time (``discard``): closing with unread bytes would reset the connection, and a client
  still sending would lose the answer.
"""

from __future__ import annotations

import contextlib
import io
import re
import socket
import time
from email.message import Message
from typing import Any

import azure.functions as func

# Whole seconds of lingering at most, and without a byte, while dropping a refused body.
LINGER_SECONDS = 30.0
LINGER_IDLE_SECONDS = 2.0
_LINGER_SLICE = 64 * 1024

_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


# The code of the host's own 413. Azure's Functions host refuses a body over its limit
# (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT) before any function runs, so that answer is not the app's: its code
# must not read as the app's policy refusal payload_too_large ("the document is larger than the stack
# accepts at all"); a client that can re-read the document sends it through the direct upload. (Kestrel's
# own answer there is 413; Azure/azure-functions-host#10519, open, reports the host turning it into a 500.)
HOST_TOO_LARGE_CODE = "request_body_too_large"


class RequestTooLarge(Exception):
    """The body is over the host's limit (the host answers ``too_large_answer``)."""


def too_large_answer(limit: int) -> dict[str, str]:
    """The JSON body of the host's 413 for a request body over ``limit`` bytes."""
    return {
        "error": HOST_TOO_LARGE_CODE,
        "message": f"the Functions host accepts request bodies up to {limit} bytes "
        "(FUNCTIONS_REQUEST_BODY_SIZE_LIMIT); this one was refused before any function ran",
    }


class UnreadBodyRequest(func.HttpRequest):
    """A request whose declared body is over the host's limit: the host read none of it."""

    def get_body(self) -> bytes:
        raise RequestTooLarge

    def get_json(self) -> Any:
        raise RequestTooLarge


def declared_length(headers: Message[str, str]) -> int | None:
    """A well-formed Content-Length, else None (a malformed one is refused by ``read_body``)."""
    text = headers.get("Content-Length")
    return int(text) if text is not None and _CONTENT_LENGTH.fullmatch(text) else None


def read_body(headers: Message[str, str], rfile: io.BufferedIOBase, limit: int) -> bytes | None:
    """The body, or None for a Content-Length over ``limit`` (nothing of it read); ValueError for a
    malformed framing, RequestTooLarge for a chunked body that passes the limit."""
    codings = ",".join(headers.get_all("Transfer-Encoding") or [])
    if codings:
        # Only chunked frames a body we can read (RFC 9112 §6.3: any other final coding leaves its length
        # unknown; Kestrel refuses it too); read as empty, the coded bytes would be parsed as a next request.
        if [coding.strip().lower() for coding in codings.split(",")] != ["chunked"]:
            raise ValueError("Transfer-Encoding must be chunked alone")
        return _read_chunked(rfile, limit)
    if len({value.strip() for value in headers.get_all("Content-Length") or []}) > 1:
        # Which one frames the body? Reading by one would hand on a cut body and parse the rest as a
        # next request (RFC 9112 §6.3: refuse).
        raise ValueError("the request has Content-Length headers that differ")
    text = headers.get("Content-Length")
    if text is None:
        return b""
    if not _CONTENT_LENGTH.fullmatch(text):
        raise ValueError("Content-Length must be a whole number")
    if int(text) > limit:
        return None
    body = rfile.read(int(text))
    if len(body) < int(text):
        # The client ended its side early: a truncated body handed on as whole would be stored as the
        # document (Kestrel fails such a request too, "Unexpected end of request content").
        raise ValueError(f"the body ended after {len(body)} of its {int(text)} bytes (Content-Length)")
    return body


def _read_chunked(rfile: io.BufferedIOBase, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = rfile.readline(1024).split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_line):
            raise ValueError("malformed chunked body")
        size = int(size_line, 16)
        if size == 0:
            while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                pass  # trailers carry nothing we use
            return b"".join(chunks)
        total += size
        if total > limit:
            raise RequestTooLarge
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise ValueError("malformed chunked body: it ended inside a chunk")
        chunks.append(chunk)
        if rfile.readline(1024) not in (b"\r\n", b"\n"):
            raise ValueError("malformed chunked body: a chunk is longer than its size")


def discard(connection: socket.socket, rfile: io.BufferedIOBase, remaining: int | None) -> None:
    """Drop what the client still sends of a refused body: ``remaining`` bytes (None: until it stops
    sending), one slice in memory, for at most LINGER_SECONDS."""
    deadline = time.monotonic() + LINGER_SECONDS
    with contextlib.suppress(OSError, ValueError):
        connection.settimeout(LINGER_IDLE_SECONDS)
        while (remaining is None or remaining > 0) and time.monotonic() < deadline:
            dropped = rfile.read1(_LINGER_SLICE if remaining is None else min(_LINGER_SLICE, remaining))
            if not dropped:
                return
            if remaining is not None:
                remaining -= len(dropped)
