"""Claim-check benchmark against Azurite: produce + consume payloads of several sizes.

For each size it prints the envelope size, claim-check throughput, peak RSS growth (sampled in a
thread with psutil) and the ratio of claim-check time to a raw upload + download of the same bytes
with the same SDK and the same transfer settings, measured in the same run. Next to the times, the
client CPU of each (this process's CPU time over the round trip, all its threads, without the RSS
sampler's own): the Python work per document that a GIL-bound worker pays whatever the wall time.
Next to it, Azurite's CPU over the same round trip (its Node process, one thread serving blob and table
alike), and the floor they set together: no overlap can bring a round trip below (client CPU + Azurite
CPU) / cores on this machine, so a ratio target under that floor cannot be met here by scheduling.
Raw and claim-check round trips alternate; each figure is the median of 9 pairs up to 1 MB and of 3
at 100 MB (1 GiB: one pair); the RSS growth is the largest of the runs.

    python -m bench.claimcheck                    # 1KB,1MB,100MB,1GiB
    python -m bench.claimcheck --sizes 1MB,100MB
    python -m bench.claimcheck --sizes 1KB --functions-logging   # logging as the Functions worker sets it
    python -m bench.claimcheck --sizes 100MB --whole-document-analyzer   # the consumer spools the document

Targets: envelope ≤ 1 KiB; peak RSS growth < 64 MiB at 1 GiB; claim-check ≤ 3x raw at 1 KB, ≤ 1.5x
at 1 MB, ≤ 1.1x at 100 MB and 1 GiB. The last column counts the storage requests of intake and of
consumption (local/storage_requests.py), the cause of the fixed cost per document.
Payloads come from a deterministic generator (seeded text blocks, made once per process so that
neither measured round trip pays for them), never held whole in memory.
The analyzer step uses a bounded analyzer that reads only the first 64 KiB of the verified
document and declares it (``reads_leading_bytes``), so the consumer keeps only that head in memory;
the full payload is still downloaded and verified (length, sha256, type) before it is called.
``--whole-document-analyzer`` makes it declare nothing: the consumer then spools the whole verified
object (to a temporary file beyond 8 MiB), as for the default analyzer.
"""

from __future__ import annotations

import argparse
import functools
import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import psutil
from azure.storage.blob import BlobServiceClient
from claimcheck import ClaimCheck, Complete, InboundMessage, Settings
from claimcheck.adapters.azure import provision_storage
from claimcheck.analysis import AnalysisResult
from claimcheck.integrity import DEFAULT_CHUNK_BYTES
from claimcheck.policy import DEFAULT_PURPOSES, Classification, CleanupPolicy, PurposePolicy
from claimcheck.testing import InMemoryBus, consume_and_settle

from local.azurite import start_azurite
from local.storage_requests import StorageRequests

SIZES = {"1KB": 1000, "1MB": 10**6, "100MB": 100 * 10**6, "1GiB": 1024**3}
BENCH_PURPOSE = "bench"
ANALYZER_READ_BYTES = 64 * 1024
_BLOCK = 1024 * 1024
REPEATS = 9  # runs of each size up to 1 MB (medians)
LARGE_REPEATS = 3  # runs of each size above 1 MB up to 100 MB; 1 GiB runs once


def runs_of(size: int) -> int:
    return REPEATS if size <= 10**6 else LARGE_REPEATS if size <= 100 * 10**6 else 1


# Issue 14's targets: claim-check time over the raw upload + download, per size.
TARGET_RATIOS = {"1KB": 3.0, "1MB": 1.5, "100MB": 1.1, "1GiB": 1.1}


class PayloadStream:
    """``size`` bytes of seeded ASCII text, produced block by block (one 1 MiB block in memory)."""

    def __init__(self, size: int, seed: int = 7) -> None:
        self._block = _seeded_block(seed)
        self._remaining = size
        self._offset = 0

    def read(self, size: int = -1) -> bytes:
        want = self._remaining if size < 0 else min(size, self._remaining)
        parts = []
        while want > 0:
            start = self._offset % _BLOCK
            piece = self._block[start : start + want]
            parts.append(piece)
            want -= len(piece)
            self._offset += len(piece)
            self._remaining -= len(piece)
        return b"".join(parts)


@functools.cache
def _seeded_block(seed: int) -> bytes:
    """One 1 MiB block of seeded text (made once: a few ms of CPU that is no part of a round trip)."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz      \n"
    rng = random.Random(seed)
    return bytes(rng.choice(alphabet) for _ in range(4096)) * (_BLOCK // 4096)


class FormattingHandler(logging.Handler):
    """Formats every record it gets and drops it: the least a handler on the root logger costs (the
    Azure Functions Python worker's also ships each record to the host over gRPC)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.format(record)


def log_as_functions_worker() -> None:
    """The root logger at INFO with a handler, as the Azure Functions Python worker sets it up."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    handler = FormattingHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


def head_analysis(document: BinaryIO) -> AnalysisResult:
    """The bench's analysis: reads only the first 64 KiB of the verified document."""
    head = document.read(ANALYZER_READ_BYTES)
    return AnalysisResult(
        document_type="document",
        parties=(),
        dates=(),
        obligations=(),
        page_count=max(1, head.count(b"\n") // 50),
        review_required=False,
        priority="normal",
    )


class HeadAnalyzer:
    """Bounded analyzer: reads only the first 64 KiB of the verified document, and says so."""

    reads_leading_bytes = ANALYZER_READ_BYTES

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        return head_analysis(document)


def process_cpu(process: psutil.Process) -> tuple[float, float]:
    """CPU seconds of ``process`` so far: every thread's, and its main thread's alone (Node's event
    loop, where Azurite handles every request). From /proc/<pid>/task/<tid>/schedstat (nanoseconds)
    where Linux has it, since psutil's user + system times tick at 10 ms, coarser than one small
    round trip; else psutil's, for both."""
    tasks = Path(f"/proc/{process.pid}/task")
    if tasks.is_dir():
        times = {
            task.name: int((task / "schedstat").read_text().split()[0]) / 1e9 for task in tasks.iterdir()
        }
        return sum(times.values()), times.get(str(process.pid), 0.0)
    cpu = process.cpu_times()
    return float(cpu.user + cpu.system), float(cpu.user + cpu.system)


class WholeDocumentHeadAnalyzer:
    """The same reading without the declaration: the consumer keeps (spools) the whole document."""

    def analyze(self, document: BinaryIO, content_type: str) -> AnalysisResult:
        return head_analysis(document)


class Measured:
    """Wall time, client CPU, server CPU and peak RSS growth of a block: RSS is sampled every 5 ms in
    a thread.

    ``cpu_seconds`` is the process's CPU time (user + system, every thread: the SDK's requests, the
    thread pool's, the kernel's work on our sockets) over the block, less the sampler thread's own.
    ``server_cpu_seconds`` is the CPU time of ``server`` (Azurite) over the same block, every thread;
    ``server_loop_seconds`` its main thread's (the event loop)."""

    def __init__(self, server: psutil.Process) -> None:
        self._server = server
        self.server_cpu_seconds = self.server_loop_seconds = 0.0
        self._started_server_cpu = (0.0, 0.0)
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.start_rss = self.peak_rss = 0
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self._sampler_cpu = 0.0
        self._started = 0.0
        self._started_cpu = 0.0

    def _sample(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(0.005):
            self.peak_rss = max(self.peak_rss, self._process.memory_info().rss)
        self._sampler_cpu = time.thread_time() - started

    def __enter__(self) -> Measured:
        self.start_rss = self.peak_rss = self._process.memory_info().rss
        self._thread.start()
        self._started_server_cpu = process_cpu(self._server)
        self._started_cpu = time.process_time()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.perf_counter() - self._started
        cpu = time.process_time() - self._started_cpu
        (cpu_now, loop_now), (cpu_then, loop_then) = process_cpu(self._server), self._started_server_cpu
        self.server_cpu_seconds, self.server_loop_seconds = cpu_now - cpu_then, loop_now - loop_then
        self._stop.set()
        self._thread.join()
        self.cpu_seconds = max(0.0, cpu - self._sampler_cpu)
        self.peak_rss = max(self.peak_rss, self._process.memory_info().rss)

    @property
    def rss_growth(self) -> int:
        return self.peak_rss - self.start_rss


@dataclass(frozen=True)
class Row:
    label: str
    transport: str
    envelope_bytes: int
    claimcheck_seconds: float
    raw_seconds: float
    claimcheck_cpu: float  # seconds of this process's CPU per round trip (median)
    raw_cpu: float
    claimcheck_server_cpu: float  # seconds of Azurite's CPU per round trip (median)
    raw_server_cpu: float
    claimcheck_server_loop: float  # of which Azurite's event loop (median)
    claimcheck_rss: int
    raw_rss: int
    size: int
    intake_requests: int
    consume_requests: int
    raw_requests: int


def raw_round_trip(blobs: BlobServiceClient, container: str, size: int) -> None:
    blob = blobs.get_blob_client(container, f"raw-{uuid.uuid4().hex}")
    blob.upload_blob(PayloadStream(size), length=size)  # type: ignore[arg-type]
    for _chunk in blob.download_blob().chunks():
        pass
    blob.delete_blob()


def claim_check_round_trip(
    claimcheck: ClaimCheck,
    bus: InMemoryBus,
    settings: Settings,
    size: int,
    requests: StorageRequests,
    classification: Classification = Classification.RESTRICTED,
) -> tuple[str, int, int, int]:
    """Produce then consume one payload; (transport, envelope bytes, intake and consumption requests)."""
    with requests.measure() as intake:
        receipt = claimcheck.producer.submit(
            PayloadStream(size),
            tenant_id="bench",
            purpose=BENCH_PURPOSE,
            classification=classification.value,
            content_type="text/plain",
        )
    sent = bus.messages(settings.documents_queue)[-1]
    with requests.measure() as consumption:
        outcome = consume_and_settle(
            claimcheck.consumer,
            InboundMessage(
                body=sent.body,
                message_id=sent.message_id,
                delivery_count=1,
                session_id=sent.session_id,
                correlation_id=sent.correlation_id,
                application_properties=sent.application_properties,
                enqueued_time=None,
            ),
        )
    if outcome != Complete():
        raise RuntimeError(f"consumer answered {outcome}")
    return receipt.transport, len(sent.body), intake.total, consumption.total


def run(
    sizes: list[str],
    classification: Classification = Classification.RESTRICTED,
    *,
    whole_document: bool = False,
) -> list[Row]:
    rows: list[Row] = []
    with start_azurite() as azurite:
        server = psutil.Process(azurite.process.pid)
        settings = replace(Settings(environment="bench"), max_payload_bytes=2 * 1024**3)
        bus = InMemoryBus()
        # Every Blob and Table request the SDKs send, counted from their own pipelines.
        requests = StorageRequests()
        purposes = {
            **DEFAULT_PURPOSES,
            BENCH_PURPOSE: PurposePolicy(
                name=BENCH_PURPOSE,
                content_types=frozenset({"text/plain"}),
                classifications=frozenset(Classification),
                cleanup=CleanupPolicy.SYNC,
            ),
        }
        provision_storage(settings, azurite.connection_string)
        claimcheck = ClaimCheck.from_settings(
            settings,
            storage_connection=azurite.connection_string,
            bus=bus,
            analyzer=WholeDocumentHeadAnalyzer() if whole_document else HeadAnalyzer(),
            purposes=purposes,
            request_hook=requests.hook,
        )
        # The raw baseline uses the same SDK with the same transfer settings as the claim check.
        transfer = DEFAULT_CHUNK_BYTES
        blobs = BlobServiceClient.from_connection_string(
            azurite.connection_string,
            max_single_get_size=transfer,
            max_chunk_get_size=transfer,
            max_block_size=transfer,
            max_single_put_size=transfer,
            raw_request_hook=functools.partial(requests.hook, "blob"),
        )
        raw_container = "raw-baseline"
        blobs.create_container(raw_container)
        claim_check_round_trip(claimcheck, bus, settings, 10**6, requests)  # warm up connections and tables
        raw_round_trip(blobs, raw_container, 10**6)
        for label in sizes:
            size = SIZES[label]
            # A shared machine's noise is as large as the difference measured: alternate raw and
            # claim-check runs and keep the median of each (9 pairs up to 1 MB, 3 at 100 MB, 1 GiB once)
            # and the largest RSS growth.
            raws: list[Measured] = []
            checks: list[Measured] = []
            for _ in range(runs_of(size)):
                with Measured(server) as raw, requests.measure() as raw_requests:
                    raw_round_trip(blobs, raw_container, size)
                with Measured(server) as claim_check:
                    transport, envelope, intake, consume = claim_check_round_trip(
                        claimcheck, bus, settings, size, requests, classification
                    )
                raws.append(raw)
                checks.append(claim_check)
            raw, claim_check = _median(raws), _median(checks)
            rows.append(
                Row(
                    label,
                    transport,
                    envelope,
                    claim_check.seconds,
                    raw.seconds,
                    _median_cpu(checks),
                    _median_cpu(raws),
                    _median_server_cpu(checks),
                    _median_server_cpu(raws),
                    sorted(run.server_loop_seconds for run in checks)[len(checks) // 2],
                    max(run.rss_growth for run in checks),
                    max(run.rss_growth for run in raws),
                    size,
                    intake,
                    consume,
                    raw_requests.total,
                )
            )
            print_row(rows[-1])
    return rows


def _median(runs: list[Measured]) -> Measured:
    return sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]


def _median_cpu(runs: list[Measured]) -> float:
    return sorted(run.cpu_seconds for run in runs)[len(runs) // 2]


def _median_server_cpu(runs: list[Measured]) -> float:
    return sorted(run.server_cpu_seconds for run in runs)[len(runs) // 2]


def cpu_floor_seconds(row: Row, cores: int) -> float:
    """The least wall time the claim check's round trip can take here, however well its requests
    overlap: its client and Azurite CPU spread perfectly over every core, and never less than the
    time Azurite's event loop alone spends on it (one thread handles every request in turn)."""
    return max((row.claimcheck_cpu + row.claimcheck_server_cpu) / cores, row.claimcheck_server_loop)


def print_header() -> None:
    print(
        f"{'size':>6} {'transport':>9} {'envelope B':>10} {'cc ms':>9} {'raw ms':>9} {'cc MB/s':>8} "
        f"{'raw MB/s':>8} {'cc/raw':>7} {'cc CPU ms':>9} {'raw CPU ms':>10} "
        f"{'cc Azurite ms':>13} {'raw Azurite ms':>14} "
        f"{'cc RSS+ MiB':>11} {'raw RSS+ MiB':>12} {'requests in+out':>15}"
    )


def print_row(row: Row) -> None:
    mib = 1024 * 1024
    print(
        f"{row.label:>6} {row.transport:>9} {row.envelope_bytes:>10} {row.claimcheck_seconds * 1000:>9.1f} "
        f"{row.raw_seconds * 1000:>9.1f} {row.size / 1e6 / row.claimcheck_seconds:>8.2f} "
        f"{row.size / 1e6 / row.raw_seconds:>8.2f} {row.claimcheck_seconds / row.raw_seconds:>7.2f} "
        f"{row.claimcheck_cpu * 1000:>9.1f} {row.raw_cpu * 1000:>10.1f} "
        f"{row.claimcheck_server_cpu * 1000:>13.1f} {row.raw_server_cpu * 1000:>14.1f} "
        f"{row.claimcheck_rss / mib:>11.1f} {row.raw_rss / mib:>12.1f} "
        f"{f'{row.intake_requests}+{row.consume_requests}':>15}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help=f"comma-separated subset of {','.join(SIZES)}"
    )
    parser.add_argument(
        "--functions-logging",
        action="store_true",
        help="log as the Azure Functions Python worker does (root logger at INFO, with a handler)",
    )
    parser.add_argument(
        "--classification",
        default=Classification.RESTRICTED.value,
        choices=[level.value for level in Classification],
        help="the documents' classification: sensitive ones (the default, restricted) always travel by "
        f"reference; public and internal ones up to the inline threshold "
        f"({Settings(environment='bench').inline_threshold_bytes} B by default) travel in the message",
    )
    parser.add_argument(
        "--whole-document-analyzer",
        action="store_true",
        help="the analyzer declares no read bound: the consumer spools the whole verified document",
    )
    args = parser.parse_args(argv)
    classification = Classification(args.classification)
    if args.functions_logging:
        log_as_functions_worker()
    sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    unknown = [size for size in sizes if size not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    print(
        f"analyzer: reads the first {ANALYZER_READ_BYTES // 1024} KiB of the verified document "
        + ("(the whole document spooled); " if args.whole_document_analyzer else "(only that head kept); ")
        + f"classification {classification}"
        + (" (always by reference)" if classification.sensitive else " (inline up to the inline threshold)")
        + "; cleanup sync; "
        f"chunk {DEFAULT_CHUNK_BYTES // 2**20} MiB"
        + ("; root logger at INFO with a handler (as the Functions worker)" if args.functions_logging else "")
    )
    print_header()
    rows = run(sizes, classification, whole_document=args.whole_document_analyzer)
    cores = psutil.cpu_count() or 1
    # The 1 KiB bound is the reference envelope's; an inline envelope carries the payload itself.
    references = [row.envelope_bytes for row in rows if row.transport == "reference"]
    if references:
        worst = max(references)
        print(f"reference envelope ≤ 1 KiB: {'yes' if worst <= 1024 else 'NO'} (largest {worst} B)")
    for row in rows:
        ratio = row.claimcheck_seconds / row.raw_seconds
        target = TARGET_RATIOS[row.label]
        print(
            f"claim-check ≤ {target}x raw at {row.label}: {'yes' if ratio <= target else 'NO'} ({ratio:.2f}x)"
        )
        requests = row.intake_requests + row.consume_requests
        print(
            f"client CPU per document at {row.label}: claim-check {row.claimcheck_cpu * 1000:.1f} ms, "
            f"raw {row.raw_cpu * 1000:.1f} ms ({requests} storage requests against {row.raw_requests})"
        )
        floor = cpu_floor_seconds(row, cores)
        print(
            f"CPU floor at {row.label} on {cores} cores: max((client {row.claimcheck_cpu * 1000:.1f} + "
            f"Azurite {row.claimcheck_server_cpu * 1000:.1f} ms) / {cores}, Azurite's event loop "
            f"{row.claimcheck_server_loop * 1000:.1f} ms) = {floor * 1000:.1f} ms, "
            f"{floor / row.raw_seconds:.2f}x raw's wall"
            + (" — above the target: no overlap can meet it here" if floor / row.raw_seconds > target else "")
        )
        if row.label == "1GiB":
            print(f"RSS growth at 1 GiB < 64 MiB: {'yes' if row.claimcheck_rss < 64 * 2**20 else 'NO'}")


if __name__ == "__main__":
    main()
