"""The local host's HTTP edge under bursts, saturation and malformed requests: always an answer, always
the API's JSON error shape, never a reset connection."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from local.functions_host import RunningHost, start_host
from local.functions_host.host_config import HttpOptions

from .conftest import SAMPLE_APP


@pytest.fixture
def http_host() -> Iterator[RunningHost]:
    with start_host(SAMPLE_APP, port=0, only=["echo", "slow"]) as host:
        yield host


@pytest.fixture
def tight_host() -> Iterator[RunningHost]:
    """One function at a time, one more waiting: the third concurrent request is over the limit."""
    limits = HttpOptions(max_concurrent_requests=1, max_outstanding_requests=2)
    with start_host(SAMPLE_APP, port=0, only=["slow"], http_limits=limits) as host:
        yield host


def _raw(host: RunningHost, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are and read the one response (the server closes after an error)."""
    with socket.create_connection(("127.0.0.1", host.port), timeout=30) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)
    }
    return int(status_line.split()[1]), headers, body


def test_route_parameters_are_url_decoded_like_azure(http_host: RunningHost) -> None:
    """'order%3A42' reaches the function as 'order:42'; an encoded '/' stays inside its segment."""
    decoded = requests.post(f"{http_host.base_url}/echo/order%3A42", data=b"x", timeout=30)
    assert decoded.json()["name"] == "order:42"
    slash = requests.post(f"{http_host.base_url}/echo/a%2Fb", data=b"x", timeout=30)
    assert slash.json()["name"] == "a/b"


def test_a_burst_of_concurrent_posts_is_answered_in_full(http_host: RunningHost) -> None:
    """100 simultaneous POSTs on fresh connections: every one gets its answer, none is reset."""

    def post(number: int) -> int:
        return requests.post(f"{http_host.base_url}/echo/n{number}", data=b"burst", timeout=120).status_code

    with ThreadPoolExecutor(max_workers=100) as pool:
        statuses = list(pool.map(post, range(100)))
    assert statuses == [201] * 100


def test_a_saturated_host_answers_503_json_with_retry_after(tight_host: RunningHost) -> None:
    """Beyond the running + waiting limit, requests get a quick JSON 503 with Retry-After, not a reset."""

    def get(_: int) -> requests.Response:
        # Connection: close, so no idle keep-alive connection is left holding a thread afterwards.
        url = f"{tight_host.base_url}/slow?seconds=2"
        return requests.get(url, headers={"Connection": "close"}, timeout=120)

    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = list(pool.map(get, range(6)))
    statuses = sorted(response.status_code for response in responses)
    assert 200 in statuses
    assert 503 in statuses
    assert set(statuses) == {200, 503}
    for refused in (response for response in responses if response.status_code == 503):
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["error"] == "service_busy"
    # Once the burst is over, the host serves again (as soon as its threads have seen the clients leave).
    deadline = time.monotonic() + 30
    while (answer := requests.get(f"{tight_host.base_url}/slow?seconds=0", timeout=30)).status_code != 200:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)


def test_connections_over_the_cap_get_a_json_503(tight_host: RunningHost) -> None:
    """Idle keep-alive connections hold threads; past the cap a new one is answered 503, not dropped."""
    cap = 2 * 2  # twice max_outstanding_requests
    idle = [socket.create_connection(("127.0.0.1", tight_host.port), timeout=30) for _ in range(cap)]
    try:
        status, headers, body = _raw(tight_host, b"GET /api/slow?seconds=0 HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        for connection in idle:
            connection.close()
    assert (status, headers["retry-after"], json.loads(body)["error"]) == (503, "1", "service_busy")


@pytest.mark.parametrize(
    ("request_bytes", "status", "error"),
    [
        (
            b"GET /api/slow HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-H%d: v\r\n" % n for n in range(120))
            + b"\r\n",
            431,
            "request_header_fields_too_large",
        ),
        (
            b"GET /api/slow HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
            431,
            "request_header_fields_too_large",
        ),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "request_uri_too_long"),
        (b"NONSENSE\r\n\r\n", 400, "bad_request"),
        (b"BREW /api/slow HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method_not_allowed"),
        (b"POST /api/echo/x HTTP/1.1\r\nContent-Length: \xc2\xb2\r\n\r\n", 400, "bad_request"),
        (b"POST /api/echo/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\xd9\xa3\r\n", 400, "bad_request"),
    ],
    ids=[
        "too-many-headers",
        "header-too-long",
        "uri-too-long",
        "garbage",
        "unknown-method",
        "length-2",
        "chunk",
    ],
)
def test_the_hosts_own_refusals_are_json(
    http_host: RunningHost, request_bytes: bytes, status: int, error: str
) -> None:
    """What the host answers itself (standard library refusals included) is the API's JSON, never HTML."""
    answered, headers, body = _raw(http_host, request_bytes)
    assert answered == status
    assert headers["content-type"].startswith("application/json")
    document = json.loads(body)
    assert document["error"] == error
    assert document["message"]
