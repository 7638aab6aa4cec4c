"""A tiny stdlib HTTP server standing in for the Function App API, for argument/formatting tests only.

The real API is exercised by the end-to-end tests; this one records what the CLI sent and answers
with canned JSON.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ApiStub:
    base_url: str
    requests: list[RecordedRequest] = field(default_factory=list)
    # (method, path) -> (status, JSON answer); path includes the query string.
    answers: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)


@contextmanager
def running_api_stub() -> Iterator[ApiStub]:
    stub = ApiStub(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}  # case-free names
            stub.requests.append(RecordedRequest(self.command, self.path, headers, body))
            status, answer = stub.answers.get((self.command, self.path), (404, {"error": "not_found"}))
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/api"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
