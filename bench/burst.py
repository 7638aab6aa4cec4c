"""Burst benchmark through the whole local stack: N documents across M tenants, HTTP intake to result.

Starts the local stack (Azurite, the Service Bus emulator, the Functions host running
functions/function_app.py with its host.json), sends N documents over HTTP from C concurrent
clients, and times each document from the start of its POST until its result event reaches the
``audit`` subscription. Prints the intake rate, end-to-end documents/s, latency percentiles, and
whether every document ended as expected (status ``completed``, exactly one audit event each).

    python -m bench.burst                                   # 200 documents, 20 tenants, 8 clients
    python -m bench.burst --documents 50 --classification confidential   # stored by reference
    python -m bench.burst --host-instances 1                # the Function App in one host process

The Function App runs as ``--host-instances`` host processes (default: LOCAL_FUNCTIONS_HOST_INSTANCES,
else 2; local.functions_host.instances), and the CPU figures name each instance.

Target (issue 14): 200 documents at >= 20 documents/s on the 2-core reference machine. A benchmark
prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests
from azure.servicebus import ServiceBusClient

from bench.cpu import CpuMeter
from local.stack import LocalStack, start_stack

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "contracts"
DOCUMENTS = ("service-agreement.txt", "urgent-notice.txt")
# The local issuer's test identity: its access-table grant covers every tenant id starting with "t-".
IDENTITY = "local-tests"
BENCH_PROCESS = "bench (clients)"


@dataclass
class Timeline:
    sent_at: dict[str, float] = field(default_factory=dict)
    accepted_at: dict[str, float] = field(default_factory=dict)
    done_at: dict[str, float] = field(default_factory=dict)
    audit_events: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _listen(stack: LocalStack, timeline: Timeline, stop: threading.Event) -> None:
    """Receive (and complete) every result event on ``audit``, noting when each work item's arrived."""
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client,
        client.get_subscription_receiver("results", "audit", prefetch_count=100) as receiver,
    ):
        while not stop.is_set():
            for message in receiver.receive_messages(max_message_count=100, max_wait_time=0.5):
                arrived = time.perf_counter()
                work_item_id = json.loads(b"".join(message.body))["summary"]["work_item_id"]
                with timeline.lock:
                    timeline.audit_events[work_item_id] += 1
                    timeline.done_at.setdefault(work_item_id, arrived)
                receiver.complete_message(message)


def run(
    documents: int,
    tenants: int,
    clients: int,
    classification: str,
    timeout: float,
    keep: Path | None,
    host_instances: int | None = None,
) -> None:
    bodies = [(SAMPLES / name).read_bytes() for name in DOCUMENTS]
    tenant_ids = [f"t-burst-{uuid.uuid4().hex[:8]}-{index}" for index in range(tenants)]
    print(
        f"starting the local stack ({documents} documents, {tenants} tenants, {clients} clients, "
        f"classification {classification})",
        flush=True,
    )
    with start_stack(work_dir=keep, host_instances=host_instances) as stack:
        print(f"host instances: {stack.host_instances} (pids {', '.join(map(str, stack.host_pids()))})")
        token = stack.token(IDENTITY)
        timeline, stop = Timeline(), threading.Event()
        listener = threading.Thread(target=_listen, args=(stack, timeline, stop), daemon=True)
        listener.start()
        session = requests.Session()
        session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=clients))
        # Warm up: the first invocation builds the app's clients; not part of the figures.
        _submit(session, stack, token, bodies[0], tenant_ids[0], classification, timeline)
        _wait(timeline, len(timeline.sent_at), timeout)

        def send(index: int) -> str:
            return _submit(
                session,
                stack,
                token,
                bodies[index % 2],
                tenant_ids[index % tenants],
                classification,
                timeline,
            )

        with CpuMeter(_component_pids(stack), own_only=frozenset({BENCH_PROCESS})) as cpu:
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=clients) as pool:
                work_item_ids = list(pool.map(send, range(documents)))
            sent = time.perf_counter()
            finished = _wait(timeline, len(timeline.sent_at), timeout)
            ended = time.perf_counter()
        time.sleep(1.0)  # a duplicate result event would arrive right behind the first
        stop.set()
        listener.join()
        states = _final_states(session, stack, token, work_item_ids)
        # The host logs its trigger workers' time per phase when it stops (local.functions_host).
        stack.host.stop()
        workers = [line for line in stack.host.log_path.read_text().splitlines() if "workers' time" in line]
    latencies = sorted(
        timeline.done_at[wid] - timeline.sent_at[wid] for wid in work_item_ids if wid in timeline.done_at
    )
    done = len(latencies)
    print(
        f"intake: {documents} accepted in {sent - started:.1f} s "
        f"({documents / (sent - started):.1f} documents/s)"
    )
    print(
        f"end to end: {done}/{documents} results in {ended - started:.1f} s "
        f"({done / (ended - started):.1f} documents/s)"
        + ("" if finished else f"; TIMED OUT after {timeout:.0f} s")
    )
    if latencies:
        quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
        print(
            f"latency POST -> result event: p50 {quantiles[49] * 1000:.0f} ms, "
            f"p95 {quantiles[94] * 1000:.0f} ms, "
            f"max {latencies[-1] * 1000:.0f} ms"
        )
    duplicates = sum(1 for wid in work_item_ids if timeline.audit_events[wid] > 1)
    print(f"final states: {dict(Counter(states.values()))}; duplicate result events: {duplicates}")
    expected = all(state == "completed" for state in states.values()) and done == documents and not duplicates
    print(f"every document ended as expected: {'yes' if expected else 'NO'}")
    print(cpu.report())
    instances = {name: seconds for name, seconds in cpu.seconds.items() if name.startswith("host instance")}
    if len(instances) > 1:
        each = ", ".join(f"{seconds:.1f} s" for _, seconds in sorted(instances.items()))
        total = sum(instances.values())
        print(f"  functions host, all {len(instances)} instances: {total:.1f} s ({each})")
    for line in workers:
        # Whole run (the warm-up and idle polls too): per-document figures are the "each" ones.
        tag = re.search(r"\[instance \d+\]", line)
        print(f"host {tag.group(0) + ' ' if tag else ''}" + line.split(": ", 1)[-1])


def _component_pids(stack: LocalStack) -> dict[str, int]:
    """The processes that do the burst's work: the stack's components and this bench (its HTTP clients
    and the audit listener are threads of this process)."""
    pids = {
        "Service Bus emulator": stack.emulator.process,
        "token issuer": stack.issuer.process,
        "Azurite": stack.azurite.process,
    }
    found = {name: process.pid for name, process in pids.items() if process is not None}
    hosts = stack.host_pids()
    if len(hosts) == 1:
        found["functions host"] = hosts[0]
    else:
        found.update({f"host instance {index}": pid for index, pid in enumerate(hosts)})
    return {**found, BENCH_PROCESS: os.getpid()}


def _submit(
    session: requests.Session,
    stack: LocalStack,
    token: str,
    body: bytes,
    tenant: str,
    classification: str,
    timeline: Timeline,
) -> str:
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": classification,
        "Content-Type": "text/plain",
    }
    work_item_id = f"wi-{uuid.uuid4().hex}"
    headers["X-Work-Item-Id"] = work_item_id
    with timeline.lock:
        timeline.sent_at[work_item_id] = time.perf_counter()
    while True:
        response = session.post(f"{stack.api_url}/documents", data=body, headers=headers, timeout=120)
        if response.status_code == 503:  # the host's own throttle: wait as told, like a client would
            time.sleep(float(response.headers.get("Retry-After", "1")))
            continue
        if response.status_code != 202:
            raise RuntimeError(f"intake answered {response.status_code}: {response.text[:200]}")
        with timeline.lock:
            timeline.accepted_at[work_item_id] = time.perf_counter()
        return work_item_id


def _wait(timeline: Timeline, expected: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with timeline.lock:
            if len(timeline.done_at) >= expected:
                return True
        time.sleep(0.05)
    return False


def _final_states(
    session: requests.Session, stack: LocalStack, token: str, work_item_ids: list[str]
) -> dict[str, str]:
    states = {}
    for work_item_id in work_item_ids:
        response = session.get(
            f"{stack.api_url}/work-items/{work_item_id}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        states[work_item_id] = response.json().get("state", f"http {response.status_code}")
    return states


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument(
        "--classification", default="internal", help="internal: inline; confidential: by reference"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for every result")
    parser.add_argument("--keep", type=Path, help="keep the stack's folder (logs) here")
    parser.add_argument(
        "--host-instances",
        type=int,
        default=None,
        help="host processes running the Function App (default: $LOCAL_FUNCTIONS_HOST_INSTANCES, else 2)",
    )
    args = parser.parse_args(argv)
    run(
        args.documents,
        args.tenants,
        args.clients,
        args.classification,
        args.timeout,
        args.keep,
        args.host_instances,
    )


if __name__ == "__main__":
    main()
