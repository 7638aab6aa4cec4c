"""A 1 GiB document through the local stack's HTTP intake with bounded memory (issue 14 C).

The agent client takes the direct-upload path by itself (above its threshold): the grant, the bytes
straight to Azurite, and the commit, where the Functions host streams the staged object through the
producer into its own write-once copy. The host's resident set is sampled from /proc the whole time;
its growth over the baseline (taken after a small warm-up upload loaded every library) must stay under
64 MiB. The body is generated as a stream on both sides: neither the test nor the host ever holds it.

Its own stack (the session stack caps documents at 1 MiB), marked slow and large (3-4 minutes on a
shared 2-core machine; ``-m 'not large'`` leaves it out); it prints its figures.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claimcheck.client import ClaimCheckClient
from claimcheck.settings import SETTING_NAMES

from infra.topology import load_topology
from local.stack import LocalStack, start_stack

from .conftest import TEST_TOPOLOGY
from .journey import TEST_IDENTITY

GIB = 1024**3
RSS_GROWTH_LIMIT = 64 * 1024**2
# One generated line pattern, repeated: text the declared type accepts, no byte of it held twice.
_PATTERN = b"".join(f"{i:07d} the supplier shall deliver the goods in full.\n".encode() for i in range(16384))


class GeneratedDocument(io.RawIOBase):
    """``size`` bytes of repeated text, generated on read; seekable, so the client can learn its size."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, min(self._size, base + offset))
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        size = min(len(view), self._size - self._position)
        filled, offset = 0, self._position % len(_PATTERN)
        while filled < size:
            part = _PATTERN[offset : offset + size - filled]
            view[filled : filled + len(part)] = part
            filled += len(part)
            offset = 0
        self._position += size
        return size


class RssSampler:
    """Samples a process's VmRSS every 100 ms; the kernel's VmHWM (reset at start) backs up the peak."""

    def __init__(self, pid: int) -> None:
        self._status = Path(f"/proc/{pid}/status")
        self._clear_refs = Path(f"/proc/{pid}/clear_refs")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.baseline = self.peak = self._read("VmRSS")

    def _read(self, field: str) -> int:
        for line in self._status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"{field} not in {self._status}")

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._read("VmRSS"))

    def __enter__(self) -> RssSampler:
        try:  # "5" resets the peak resident set (VmHWM) to the current one: a second, kernel-side peak
            self._clear_refs.write_text("5")
            self._hwm = True
        except OSError:
            self._hwm = False
        self.baseline = self.peak = self._read("VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._read("VmRSS"), self._read("VmHWM") if self._hwm else 0)

    @property
    def growth(self) -> int:
        return self.peak - self.baseline


@pytest.fixture(scope="module")
def large_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    work_dir = tmp_path_factory.mktemp("large-stack")
    with start_stack(
        work_dir=work_dir,
        topology=load_topology(TEST_TOPOLOGY),
        app_settings={SETTING_NAMES["max_payload_bytes"]: str(2 * GIB)},
        # One host process, so that the sampled process is the one the upload goes through (the bound
        # is per process; with several instances any of them may take the connection).
        host_instances=1,
    ) as running:
        yield running
    # Azurite's data folder now holds two copies of the gigabyte: give the disk back (logs stay).
    shutil.rmtree(work_dir / "azurite", ignore_errors=True)


def _submit(client: ClaimCheckClient, size: int, tenant: str) -> dict[str, object]:
    receipt = client.submit(
        io.BufferedReader(GeneratedDocument(size)),
        tenant_id=tenant,
        purpose="bulk-ingest",
        classification="internal",
        content_type="text/plain",
    )
    return dict(receipt.raw["receipt"])


@pytest.mark.slow
@pytest.mark.large
@pytest.mark.timeout(1500)
def test_a_1_gib_document_through_http_intake_keeps_the_host_rss_growth_under_64_mib(
    large_stack: LocalStack,
) -> None:
    assert large_stack.host.process is not None
    client = ClaimCheckClient(
        large_stack.api_url, lambda: large_stack.token(TEST_IDENTITY), timeout=900, direct_upload_threshold=0
    )
    tenant = f"t-large-{uuid.uuid4().hex[:8]}"
    _submit(client, 1024 * 1024, tenant)  # warm-up: every library the path needs is loaded

    expected = hashlib.sha256()
    source = io.BufferedReader(GeneratedDocument(GIB))
    while chunk := source.read(8 * 1024 * 1024):
        expected.update(chunk)

    client = ClaimCheckClient(large_stack.api_url, lambda: large_stack.token(TEST_IDENTITY), timeout=900)
    started = time.monotonic()
    with RssSampler(large_stack.host.process.pid) as rss:
        receipt = _submit(client, GIB, tenant)
    seconds = time.monotonic() - started
    print(
        f"\n1 GiB direct upload: {seconds:.1f} s end to end (grant, upload to Azurite, verified commit);"
        f" host RSS baseline {rss.baseline / 2**20:.1f} MiB, peak {rss.peak / 2**20:.1f} MiB,"
        f" growth {rss.growth / 2**20:.1f} MiB (limit {RSS_GROWTH_LIMIT / 2**20:.0f})"
    )
    assert (receipt["content_length"], receipt["sha256"]) == (GIB, expected.hexdigest())
    assert receipt["transport"] == "reference"
    assert rss.growth < RSS_GROWTH_LIMIT, f"host RSS grew by {rss.growth / 2**20:.1f} MiB"
