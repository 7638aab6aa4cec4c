"""claimcheck.client's retries against a scripted HTTP server on loopback (real HTTP, no mocks)."""

from __future__ import annotations

import hashlib
import json
import threading
import traceback
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

    do_GET = do_POST = do_PUT = _answer

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


SIGNATURE = "c2VjcmV0LXNpZ25hdHVyZS1uZXZlci1pbi1hbi1lcnJvcg%3D%3D"


def _grant(server: _Scripted, block_bytes: int) -> dict[str, Any]:
    host, port = server.server_address[:2]
    return {
        "upload_id": "up_" + "a" * 27,
        "upload_url": f"http://{host!s}:{port}/payloads/uploads/x?sv=2021-12-02&sp=w&sig={SIGNATURE}",
        "block_bytes": block_bytes,
    }


def test_above_the_threshold_submit_grants_puts_blocks_and_commits_what_it_sent(serve: Any) -> None:
    document = b"0123456789abc"
    server = serve([])
    server.script += [(201, {}, _grant(server, 5)), *[(201, {}, {})] * 4, (202, {}, RECEIPT)]
    client = ClaimCheckClient(
        f"http://127.0.0.1:{server.server_address[1]}/api", lambda: "token", direct_upload_threshold=10
    )
    receipt = client.submit(
        document,
        tenant_id="acme",
        purpose="bulk-ingest",
        classification="internal",
        content_type="text/plain",
    )
    assert receipt.work_item_id == "wi-1"
    paths = [path.split("?")[0] for path, _, _ in server.seen]
    assert paths == ["/api/uploads", *["/payloads/uploads/x"] * 4, f"/api/uploads/up_{'a' * 27}/commit"]
    grant_headers, commit_headers = server.seen[0][1], server.seen[-1][1]
    assert (grant_headers["X-Upload-Length"], grant_headers["X-Upload-Content-Type"]) == ("13", "text/plain")
    assert "Idempotency-Key" not in grant_headers
    assert commit_headers["X-Upload-Sha256"] == hashlib.sha256(document).hexdigest()
    assert commit_headers["Idempotency-Key"] == receipt.idempotency_key
    blocks = [body for path, _, body in server.seen[1:4]]
    assert b"".join(blocks) == document
    assert all("comp=block&" in path for path, _, _ in server.seen[1:4])
    assert b"<Latest>" in server.seen[4][2]


def test_a_grant_answered_503_by_a_storage_outage_is_asked_again_after_retry_after(serve: Any) -> None:
    """The grant writes nothing, so the client asks again (it raised at the first 503 before)."""
    server = serve([])
    unavailable = (
        503,
        {"Retry-After": "5"},
        {"error": "unavailable", "message": "storage cannot be reached"},
    )
    server.script += [unavailable, (201, {}, _grant(server, 8)), *[(201, {}, {})] * 3, (202, {}, RECEIPT)]
    sleeps: list[float] = []
    client = ClaimCheckClient(
        f"http://127.0.0.1:{server.server_address[1]}/api",
        lambda: "token",
        direct_upload_threshold=4,
        sleep=sleeps.append,
    )
    receipt = client.submit(
        b"0123456789",
        tenant_id="acme",
        purpose="bulk-ingest",
        classification="internal",
        content_type="text/plain",
    )
    assert receipt.work_item_id == "wi-1"
    paths = [path.split("?")[0] for path, _, _ in server.seen]
    assert paths[:2] == ["/api/uploads", "/api/uploads"]
    assert paths[-1] == f"/api/uploads/up_{'a' * 27}/commit"
    assert len(sleeps) == 1
    assert sleeps[0] >= 5


@pytest.mark.parametrize(
    "refusal",
    [
        {"error": "use_direct_upload", "message": "too large for inline"},  # the app's inline cap
        {"error": "request_body_too_large", "message": "the Functions host accepts..."},  # the local host
        {},  # a host answer that is not the app's JSON
    ],
)
def test_an_inline_refusal_for_size_sends_the_same_document_through_the_direct_upload(
    serve: Any, refusal: dict[str, str]
) -> None:
    """An API whose inline cap, or whose host's request limit, is below this client's threshold answers
    413 before anything is stored; the client then grants, puts and commits the same bytes under the
    same key."""
    document = b"0123456789"
    server = serve([(413, {}, refusal)])
    server.script += [(201, {}, _grant(server, 16)), (201, {}, {}), (201, {}, {}), (202, {}, RECEIPT)]
    client = ClaimCheckClient(f"http://127.0.0.1:{server.server_address[1]}/api", lambda: "token")
    receipt = client.submit(
        document,
        tenant_id="acme",
        purpose="bulk-ingest",
        classification="internal",
        content_type="text/plain",
    )
    paths = [path.split("?")[0] for path, _, _ in server.seen]
    assert paths[:2] == ["/api/documents", "/api/uploads"]
    assert paths[-1] == f"/api/uploads/up_{'a' * 27}/commit"
    assert (
        server.seen[-1][1]["Idempotency-Key"]
        == server.seen[0][1]["Idempotency-Key"]
        == receipt.idempotency_key
    )
    assert server.seen[-1][1]["X-Upload-Sha256"] == hashlib.sha256(document).hexdigest()


def test_the_policy_refusal_of_the_document_itself_is_not_retried_through_the_upload(serve: Any) -> None:
    """413 payload_too_large is the app's answer that the document is larger than the stack accepts at
    all: the upload would be refused too, so the client reports it instead of trying."""
    server = serve([(413, {}, {"error": "payload_too_large", "message": "over the maximum"})])
    with pytest.raises(ApiError) as refused:
        _client(server, []).submit(
            b"document",
            tenant_id="acme",
            purpose="bulk-ingest",
            classification="internal",
            content_type="text/plain",
        )
    assert (refused.value.status, refused.value.code) == (413, "payload_too_large")
    assert [path for path, _, _ in server.seen] == ["/api/documents"]


def test_a_refused_block_is_an_api_error_that_never_carries_the_grant(serve: Any) -> None:
    server = serve([])
    server.script += [(201, {}, _grant(server, 4)), (403, {}, {"error": "AuthenticationFailed"})]
    client = ClaimCheckClient(
        f"http://127.0.0.1:{server.server_address[1]}/api", lambda: "token", direct_upload_threshold=0
    )
    with pytest.raises(ApiError) as refused:
        client.submit(
            b"document",
            tenant_id="acme",
            purpose="bulk-ingest",
            classification="internal",
            content_type="text/plain",
        )
    assert (refused.value.status, refused.value.code) == (403, "upload_failed")
    printed = "".join(traceback.format_exception(refused.value)) + repr(refused.value.body)
    assert "sig=" not in printed
    assert SIGNATURE not in printed
    assert len(server.seen) == 2  # a 403 is not retried


def test_dead_letter_calls_send_x_tenant_id_only_when_a_tenant_is_stated(serve: Any) -> None:
    """The operator routes narrow by X-Tenant-Id (the API decides what it selects); the client sends the
    header only for a stated tenant, so leaving it out keeps every granted tenant."""
    listed = {"queue": "documents", "messages": []}
    server = serve([(200, {}, listed), (200, {}, listed), (404, {}, {"error": "not_found"})])
    client = _client(server, [])

    assert client.dead_letters(10, tenant_id="acme") == (200, listed)
    assert client.dead_letters(10) == (200, listed)
    assert client.replay_dead_letter(7, tenant_id="globex")[0] == 404

    paths = [path for path, _, _ in server.seen]
    tenants = [headers.get("X-Tenant-Id") for _, headers, _ in server.seen]
    assert paths == ["/api/dead-letters?limit=10", "/api/dead-letters?limit=10", "/api/dead-letters/7/replay"]
    assert tenants == ["acme", None, "globex"]


@pytest.mark.parametrize(
    ("token", "function_key", "secret", "named"),
    [
        ("token", "key-1234\r", "key-1234", "function_key"),  # a key file's CRLF kept by $(cat ...)
        ("token-5678\n", None, "token-5678", "bearer token"),
    ],
)
def test_a_key_or_token_a_header_cannot_carry_is_refused_without_its_value(
    serve: Any, token: str, function_key: str | None, secret: str, named: str
) -> None:
    """Found in review: http.client refused such a header with "Invalid header value b'<value>'", so the
    function key or token went into the exception, an MCP tool's error text and the logs. Nothing is
    sent; the refusal names which value, never the value."""
    server = serve([(200, {}, {"work_item_id": "wi-1"})])

    def status() -> None:
        url = f"http://127.0.0.1:{server.server_address[1]}/api"
        ClaimCheckClient(url, lambda: token, function_key=function_key).status("wi-1")

    with pytest.raises(ValueError, match="its value is not shown") as refused:
        status()
    assert secret not in str(refused.value)
    assert named in str(refused.value)
    assert server.seen == []
