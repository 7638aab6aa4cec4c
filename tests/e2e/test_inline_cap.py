"""POST /documents' inline cap against the whole local stack: a body over it is refused with 413
use_direct_upload from its Content-Length, before the host reads it (host RSS does not grow by it) and
with nothing stored, registered or published; a body exactly at the cap is accepted."""

from __future__ import annotations

import contextlib
import json
import socket
import uuid
from urllib.parse import urlsplit

import requests
from azure.data.tables import TableEntity, TableServiceClient
from azure.storage.blob import ContainerClient
from claimcheck.settings import HOST_REQUEST_MARGIN_BYTES, PAYLOAD_CONTAINER, host_request_body_limit

from local.functions_host.request_body import HOST_TOO_LARGE_CODE
from local.stack import LocalStack

from .conftest import MAX_INLINE_REQUEST_BYTES
from .journey import SAMPLES, auth
from .test_large_document import RssSampler

# Far more than the cap, so that buffering it would show in the host's RSS; the host drops it unread.
OVERSIZED_BYTES = 64 * 1024 * 1024
RSS_GROWTH_LIMIT = 16 * 1024 * 1024


def _headers(stack: LocalStack, tenant: str, work_item_id: str) -> dict[str, str]:
    return auth(stack) | {
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "internal",
        "X-Work-Item-Id": work_item_id,
        "Content-Type": "text/plain",
    }


def _send_raw(stack: LocalStack, headers: dict[str, str], length: int) -> tuple[int, bytes]:
    """POST ``length`` bytes of 'x' in 1 MiB slices (never one buffer of them here) and read the answer."""
    url = urlsplit(stack.api_url)
    head = [f"POST {url.path}/documents HTTP/1.1", f"Host: {url.netloc}", f"Content-Length: {length}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    slice_ = b"x" * (1024 * 1024)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=60) as connection:
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        left = length
        while left:
            sent = slice_[: min(left, len(slice_))]
            connection.sendall(sent)
            left -= len(sent)
        connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _stored(stack: LocalStack, work_item_id: str) -> tuple[int, list[TableEntity], list[TableEntity]]:
    container = ContainerClient.from_connection_string(stack.storage_connection_string, PAYLOAD_CONTAINER)
    with TableServiceClient.from_connection_string(stack.storage_connection_string) as tables:
        rows = list(
            tables.get_table_client("workitems").query_entities(
                "PartitionKey eq @id", parameters={"id": work_item_id}
            )
        )
        records = list(
            tables.get_table_client("payloadregistry").query_entities(
                "work_item_id eq @id", parameters={"id": work_item_id}
            )
        )
    return sum(1 for _ in container.list_blobs()), rows, records


def test_a_body_over_the_inline_cap_is_refused_unread_and_leaves_nothing(stack: LocalStack) -> None:
    tenant, work_item_id = f"t-cap-{uuid.uuid4().hex[:8]}", f"wi-cap-{uuid.uuid4().hex[:12]}"
    blobs_before, _, _ = _stored(stack, work_item_id)
    just_over = requests.post(
        f"{stack.api_url}/documents",
        headers=_headers(stack, tenant, work_item_id),
        data=b"x" * (MAX_INLINE_REQUEST_BYTES + 1),
        timeout=60,
    )
    assert (just_over.status_code, just_over.json()["error"]) == (413, "use_direct_upload")
    assert "POST /api/uploads" in just_over.json()["message"]
    # Whichever host instance takes the connection (local.functions_host.instances): sample them all.
    samplers = [RssSampler(pid) for pid in stack.host_pids()]
    assert samplers
    with contextlib.ExitStack() as sampling:
        for sampler in samplers:
            sampling.enter_context(sampler)
        status, _ = _send_raw(stack, _headers(stack, tenant, work_item_id), OVERSIZED_BYTES)
    rss = max(samplers, key=lambda sampler: sampler.growth)
    print(
        f"\n{OVERSIZED_BYTES / 2**20:.0f} MiB body over a {MAX_INLINE_REQUEST_BYTES / 2**20:.0f} MiB cap:"
        f" host RSS baseline {rss.baseline / 2**20:.1f} MiB, growth {rss.growth / 2**20:.1f} MiB"
    )
    assert status == 413
    assert rss.growth < RSS_GROWTH_LIMIT, f"host RSS grew by {rss.growth / 2**20:.1f} MiB"
    assert _stored(stack, work_item_id) == (blobs_before, [], [])


def test_a_body_exactly_at_the_inline_cap_is_accepted(stack: LocalStack) -> None:
    """Multipart: the document is a sample (within the payload limit); an ignored part fills the body
    up to exactly the cap."""
    tenant, work_item_id = f"t-cap-{uuid.uuid4().hex[:8]}", f"wi-cap-{uuid.uuid4().hex[:12]}"
    boundary = uuid.uuid4().hex
    document = (SAMPLES / "service-agreement.txt").read_bytes()

    def body(filler: int) -> bytes:
        return (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="document"; filename="a.txt"\r\n'
                "Content-Type: text/plain\r\n\r\n"
            ).encode()
            + document
            + (f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="padding"\r\n\r\n').encode()
            + b"p" * filler
            + f"\r\n--{boundary}--\r\n".encode()
        )

    exact = body(MAX_INLINE_REQUEST_BYTES - len(body(0)))
    assert len(exact) == MAX_INLINE_REQUEST_BYTES
    headers = _headers(stack, tenant, work_item_id) | {
        "Content-Type": f"multipart/form-data; boundary={boundary}"
    }
    accepted = requests.post(f"{stack.api_url}/documents", headers=headers, data=exact, timeout=60)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["work_item_id"] == work_item_id


def _send_chunked(stack: LocalStack, headers: dict[str, str], length: int) -> tuple[int, bytes]:
    """POST ``length`` bytes of 'x' chunked (no Content-Length), 256 KiB a chunk, and read the answer."""
    url = urlsplit(stack.api_url)
    head = [f"POST {url.path}/documents HTTP/1.1", f"Host: {url.netloc}", "Transfer-Encoding: chunked"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    size = 256 * 1024
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=60) as connection:
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        left = length
        while left:
            part = min(left, size)
            connection.sendall(f"{part:x}\r\n".encode() + b"x" * part + b"\r\n")
            left -= part
        connection.sendall(b"0\r\n\r\n")
        connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_the_local_host_limit_is_the_cap_plus_the_margin(stack: LocalStack) -> None:
    """The stack gives the host host_request_body_limit(cap), as infra/ sets
    FUNCTIONS_REQUEST_BODY_SIZE_LIMIT on Azure: a chunked body within the margin reaches the app (413
    use_direct_upload), one past it gets the host's own 413 request_body_too_large; neither stores
    anything."""
    tenant, work_item_id = f"t-cap-{uuid.uuid4().hex[:8]}", f"wi-cap-{uuid.uuid4().hex[:12]}"
    blobs_before, _, _ = _stored(stack, work_item_id)
    headers = _headers(stack, tenant, work_item_id)
    within = MAX_INLINE_REQUEST_BYTES + HOST_REQUEST_MARGIN_BYTES // 2
    status, body = _send_chunked(stack, headers, within)
    assert (status, json.loads(body)["error"]) == (413, "use_direct_upload")
    beyond = host_request_body_limit(MAX_INLINE_REQUEST_BYTES) + 1
    status, body = _send_chunked(stack, headers, beyond)
    assert (status, json.loads(body)["error"]) == (413, HOST_TOO_LARGE_CODE)
    assert _stored(stack, work_item_id) == (blobs_before, [], [])
