"""The host never reads a request body over its limit: a larger Content-Length reaches the function with
the headers only (it may refuse from them, as intake does), ``Expect: 100-continue`` gets its final answer
instead of a 100, and a chunked body is refused before the chunk that would cross the limit is read.
Whatever the client still sends after the answer is dropped, so it reads the answer instead of a reset."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from local.functions_host import RunningHost, start_host
from local.functions_host.request_body import HOST_TOO_LARGE_CODE

from .conftest import SAMPLE_APP

LIMIT = 64 * 1024


@pytest.fixture
def limited_host() -> Iterator[RunningHost]:
    with start_host(SAMPLE_APP, port=0, only=["echo", "declared"], max_body_bytes=LIMIT) as host:
        yield host


def _exchange(host: RunningHost, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` then ``body`` (all of it: the host drops what it does not read) and read one answer."""
    with socket.create_connection(("127.0.0.1", host.port), timeout=30) as connection:
        connection.sendall(head + body)
        connection.shutdown(socket.SHUT_WR)  # all sent: the host's drop of the rest ends at once
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _post(path: str, length: int, *extra: str) -> bytes:
    lines = [f"POST /api/{path} HTTP/1.1", "Host: localhost", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_body_over_the_limit_reaches_the_function_unread(limited_host: RunningHost) -> None:
    """The function answers from Content-Length; the 4 MiB sent after the headers are dropped, not kept."""
    size = 4 * 1024 * 1024
    status, body = _exchange(limited_host, _post("declared", size), b"x" * size)
    assert (status, json.loads(body)) == (413, {"declared": str(size)})


def test_a_function_that_reads_an_over_limit_body_gets_the_host_413(limited_host: RunningHost) -> None:
    status, body = _exchange(limited_host, _post("echo/big", LIMIT + 1), b"x" * (LIMIT + 1))
    assert (status, json.loads(body)["error"]) == (413, HOST_TOO_LARGE_CODE)


def test_a_body_at_the_limit_is_read_in_full(limited_host: RunningHost) -> None:
    status, body = _exchange(limited_host, _post("echo/exact", LIMIT), b"x" * LIMIT)
    assert (status, json.loads(body)["size"]) == (201, LIMIT)


def test_expect_100_continue_over_the_limit_gets_the_final_answer_without_a_100(
    limited_host: RunningHost,
) -> None:
    """The client waits for a 100 before sending; it gets the refusal instead and sends nothing."""
    head = _post("declared", 1024**3, "Expect: 100-continue")
    status, body = _exchange(limited_host, head)
    assert (status, json.loads(body)) == (413, {"declared": str(1024**3)})


def test_a_chunked_body_is_refused_before_the_chunk_that_crosses_the_limit(limited_host: RunningHost) -> None:
    """Two chunks of LIMIT/2 fit; the third declares more than is left and is refused unread."""
    half = LIMIT // 2
    chunk = f"{half:x}\r\n".encode() + b"x" * half + b"\r\n"
    head = b"POST /api/echo/chunked HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    status, body = _exchange(limited_host, head, chunk * 3 + b"0\r\n\r\n")
    answer = json.loads(body)
    # The host's refusal, not the app's policy code (payload_too_large: the document is too large at all).
    assert (status, answer["error"]) == (413, HOST_TOO_LARGE_CODE)
    assert answer["error"] != "payload_too_large"
    assert f"up to {LIMIT} bytes (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT)" in answer["message"]


def test_a_body_shorter_than_its_content_length_is_refused_not_handed_on(limited_host: RunningHost) -> None:
    """The client declares 1,000 bytes, sends 400 and ends its side: the function must never see the 400
    as the whole body (intake would store a truncated document and answer 202); the host answers 400."""
    status, body = _exchange(limited_host, _post("echo/short", 1000), b"x" * 400)
    assert status == 400
    assert json.loads(body)["error"] == "bad_request"


def test_a_chunked_body_cut_inside_a_chunk_is_refused(limited_host: RunningHost) -> None:
    head = b"POST /api/echo/cut HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    status, body = _exchange(limited_host, head, b"400\r\n" + b"x" * 10)
    assert status == 400
    assert json.loads(body)["error"] == "bad_request"


def test_two_different_content_lengths_are_refused(limited_host: RunningHost) -> None:
    """Which one frames the body? The host read the first (5 of the 10 bytes sent, handed on as the whole
    body) and parsed the rest as a next request; RFC 9112 §6.3: refuse (400) and close."""
    head = _post("echo/twice", 5, "Content-Length: 10")
    status, body = _exchange(limited_host, head, b"x" * 10)
    assert (status, json.loads(body)["error"]) == (400, "bad_request")


def test_a_transfer_coding_other_than_chunked_last_is_refused(limited_host: RunningHost) -> None:
    """The body's length cannot be known (RFC 9112 §6.3; Kestrel answers 400 too): the host read it as
    empty and parsed the coded bytes as a next request."""
    head = b"POST /api/echo/coded HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n"
    status, body = _exchange(limited_host, head, b"\x1f\x8b" + b"x" * 20)
    assert (status, json.loads(body)["error"]) == (400, "bad_request")


def test_a_chunk_longer_than_its_size_line_is_refused(limited_host: RunningHost) -> None:
    """A chunk's data must end where its size says (then CRLF): the host dropped the extra bytes of a
    mis-framed chunk in silence and handed on the rest as the whole body (Kestrel: 400, bad chunk suffix)."""
    head = b"POST /api/echo/framed HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    status, body = _exchange(limited_host, head, b"5\r\nhello, and more\r\n0\r\n\r\n")
    assert (status, json.loads(body)["error"]) == (400, "bad_request")
