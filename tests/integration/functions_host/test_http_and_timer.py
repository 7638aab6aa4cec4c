"""The local host serves HTTP-triggered functions and fires timer triggers like the Functions host."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from local.functions_host import RunningHost, start_host
from local.functions_host.request_body import HOST_TOO_LARGE_CODE

from .conftest import SAMPLE_APP


@pytest.fixture
def http_host(journals: dict[str, Path]) -> Iterator[RunningHost]:
    with start_host(SAMPLE_APP, port=0, only=["echo", "explode", "tick"], max_body_bytes=64 * 1024) as host:
        yield host


def _wait_for_lines(path: Path, count: int, timeout: float = 20.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            if len(lines) >= count:
                return lines
        time.sleep(0.1)
    raise AssertionError(f"{path.name} did not reach {count} lines within {timeout} s")


def test_route_params_query_headers_and_body_reach_the_function(http_host: RunningHost) -> None:
    """A request to a templated route gets route params, query, headers and body; the reply is passed on."""
    response = requests.post(
        f"{http_host.base_url}/echo/alice?lang=pt", data=b"12345", headers={"X-Sample": "yes"}, timeout=10
    )
    assert response.status_code == 201
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == {"name": "alice", "query": {"lang": "pt"}, "size": 5, "header": "yes"}


def test_chunked_request_body_is_decoded(http_host: RunningHost) -> None:
    """A chunked upload reaches the function as the whole body."""
    response = requests.post(f"{http_host.base_url}/echo/bob", data=iter([b"abc", b"defg"]), timeout=10)
    assert response.json()["size"] == 7


def test_unknown_route_is_404_and_wrong_method_is_405(http_host: RunningHost) -> None:
    """Paths no function serves answer 404; a known route with a method it does not accept answers 405."""
    assert requests.get(f"{http_host.base_url}/nowhere", timeout=10).status_code == 404
    assert requests.get(f"{http_host.base_url}/echo/alice", timeout=10).status_code == 405
    assert requests.get(f"http://127.0.0.1:{http_host.port}/echo/alice", timeout=10).status_code == 404


def test_failing_function_answers_generic_500(http_host: RunningHost) -> None:
    """An exception in a function becomes a 500 whose body reveals nothing of the exception."""
    response = requests.get(f"{http_host.base_url}/explode", timeout=10)
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"
    assert "secret-internal-detail" not in response.text


def test_body_over_the_limit_is_refused_with_413(http_host: RunningHost) -> None:
    """A body larger than the configured maximum is never read: the function asking for it gets a 413."""
    response = requests.post(f"{http_host.base_url}/echo/big", data=b"x" * (64 * 1024 + 1), timeout=10)
    assert response.status_code == 413
    assert response.json()["error"] == HOST_TOO_LARGE_CODE


def test_timer_runs_on_startup_and_then_on_schedule(
    http_host: RunningHost, journals: dict[str, Path]
) -> None:
    """A run_on_startup timer fires at start, then every second per its six-field schedule."""
    lines = _wait_for_lines(journals["timer"], 3)
    assert all(line["past_due"] is False for line in lines)
