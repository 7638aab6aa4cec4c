"""claimcheck.client's retries against a scripted HTTP server on loopback (real HTTP, no mocks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from claimcheck.client import ApiError, ClaimCheckClient, Receipt

RECEIPT = {"work_item_id": "wi-1", "status_url": "/api/work-items/wi-1", "receipt": {"version": 1}}


class _Scripted(ThreadingHTTPServer):
    """Answers each request with the next (status, headers, body) of its script; records the requests."""

    def __init__(self, script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.seen: list[tuple[str, dict[str, str], bytes]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Scripted

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append((self.path, dict(self.headers), self.rfile.read(length)))
        status, headers, body = self.server.script.pop(0)
        raw = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = _answer

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[_Scripted] = []

    def start(script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> _Scripted:
        server = _Scripted(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _client(server: _Scripted, sleeps: list[float]) -> ClaimCheckClient:
    host, port = server.server_address[:2]
    return ClaimCheckClient(f"http://{host!s}:{port}/api", lambda: "token", sleep=sleeps.append)


def test_submit_resends_the_same_key_and_bytes_after_a_503_and_waits_retry_after(
    serve: Any, tmp_path: Path
) -> None:
    document = tmp_path / "doc.txt"
    document.write_bytes(b"contract text")
    server = serve([(503, {"Retry-After": "7"}, {"error": "publish_not_confirmed"}), (202, {}, RECEIPT)])
    sleeps: list[float] = []
    receipt = _client(server, sleeps).submit(
        document,
        tenant_id="acme",
        purpose="contract-review",
        classification="internal",
        content_type="text/plain",
    )
    assert (receipt.work_item_id, receipt.version) == ("wi-1", 1)
    keys = [headers["Idempotency-Key"] for _, headers, _ in server.seen]
    assert len(keys) == 2
    assert keys[0] == keys[1] == receipt.idempotency_key
    assert [body for _, _, body in server.seen] == [b"contract text"] * 2
    assert len(sleeps) == 1
    assert sleeps[0] >= 7.0


def test_submit_does_not_retry_a_refusal(serve: Any) -> None:
    server = serve([(409, {}, {"error": "idempotency_key_reused", "message": "other content"})])
    with pytest.raises(ApiError) as refused:
        _client(server, []).submit(
            b"x",
            tenant_id="acme",
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
        )
    assert refused.value.code == "idempotency_key_reused"
    assert len(server.seen) == 1


def test_wait_stops_on_the_apis_final_state(serve: Any) -> None:
    waiting = {"visibility": "awaiting_visibility", "next_action": "wait", "retry_after": 3, "version": 0}
    done = {"visibility": "version_confirmed", "next_action": "proceed", "version": 1}
    server = serve([(200, {"Retry-After": "3"}, waiting), (200, {}, done)])
    sleeps: list[float] = []
    client = _client(server, sleeps)
    final = client.wait(Receipt("wi-1", 1, "k", False, {}), deadline_seconds=60)
    assert (final.visibility, final.next_action, final.attempts, final.exhausted) == (
        "version_confirmed",
        "proceed",
        2,
        False,
    )
    assert sleeps[0] >= 3
    assert server.seen[0][0] == "/api/work-items/wi-1?min_version=1"
