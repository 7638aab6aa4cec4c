"""The client half of a direct upload: put a stream to a grant URL as blocks, hashing in the same pass.

Standard library only (the agent client's rule). Blob Storage's Put Block and Put Block List REST
operations, one block in memory at a time; the sha256 and length that come out are what the commit
declares, so the server verifies exactly the bytes this pass sent.

The grant URL carries a SAS signature: it never appears in an exception, a log or a repr from here.
Failures name the operation and the storage status only.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import BinaryIO

# The REST version the requests speak (any service version since 2019 has these two operations).
STORAGE_VERSION = "2021-12-02"


class UploadFailed(Exception):
    """Storage refused a block or the block list; ``status`` is its HTTP status (0: no answer)."""

    def __init__(self, operation: str, status: int) -> None:
        super().__init__(f"direct upload: {operation} failed (storage answered {status or 'nothing'})")
        self.status = status


def put_blocks(
    grant_url: str,
    stream: BinaryIO,
    *,
    block_bytes: int,
    timeout: float,
    attempts: int = 3,
    sleep: Callable[[float], None] | None = None,
) -> tuple[int, str]:
    """Upload ``stream`` to the grant's blob; return (length, sha256 hex) of exactly the bytes sent."""
    digest = hashlib.sha256()
    length = 0
    block_ids: list[str] = []
    while block := _read_block(stream, block_bytes):
        block_id = base64.b64encode(f"{len(block_ids):08d}".encode()).decode("ascii")
        _send(
            _with_query(grant_url, {"comp": "block", "blockid": block_id}),
            block,
            {"Content-Type": "application/octet-stream"},
            "Put Block",
            timeout,
            attempts,
            sleep,
        )
        digest.update(block)
        length += len(block)
        block_ids.append(block_id)
    listing = "".join(f"<Latest>{block_id}</Latest>" for block_id in block_ids)
    body = f'<?xml version="1.0" encoding="utf-8"?><BlockList>{listing}</BlockList>'.encode()
    _send(
        _with_query(grant_url, {"comp": "blocklist"}),
        body,
        {"Content-Type": "application/xml"},
        "Put Block List",
        timeout,
        attempts,
        sleep,
    )
    return length, digest.hexdigest()


def _read_block(stream: BinaryIO, size: int) -> bytes:
    parts: list[bytes] = []
    remaining = size
    while remaining > 0 and (part := stream.read(remaining)):
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _with_query(url: str, extra: dict[str, str]) -> str:
    parts = urllib.parse.urlsplit(url)
    query = "&".join(filter(None, (parts.query, urllib.parse.urlencode(extra))))
    return urllib.parse.urlunsplit(parts._replace(query=query))


def _send(
    url: str,
    body: bytes,
    headers: dict[str, str],
    operation: str,
    timeout: float,
    attempts: int,
    sleep: Callable[[float], None] | None,
) -> None:
    """PUT with a few retries of what may pass next time (no answer, 408, 429, 5xx); a block is
    idempotent (same id, same bytes), and so is the block list."""
    status = 0
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(  # noqa: S310 - the grant URL is the API's own answer
            url, data=body, method="PUT", headers={**headers, "x-ms-version": STORAGE_VERSION}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                response.read()
                return
        except urllib.error.HTTPError as error:
            status = error.code
            error.close()
            if status not in (408, 429) and status < 500:
                break
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            status = 0
        if sleep is not None and attempt < attempts:
            sleep(float(attempt))
    # Raised outside the except blocks and without a cause: urllib's errors carry the URL.
    raise UploadFailed(operation, status)
