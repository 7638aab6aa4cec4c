"""Embedded Service Bus emulator benchmark, driven by the real azure-servicebus SDK.

    .venv/bin/python -m bench.servicebus [--messages 5000] [--batch 100] [--size 1024] [--in-memory]

Runs the emulator as a subprocess (SQLite store on disk unless --in-memory) and prints:
- end-to-end throughput: N messages of SIZE bytes sent in batches, received with prefetch, completed;
- synchronous send round trip (one message per send_messages call): p50 / p95;
- CPU seconds used by the broker process and by this (client) process during the run.
Targets from the issue: >= 1,000 msg/s end to end; one synchronous send < 20 ms. Figures only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from local.servicebus import start_emulator_process

CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "bench",
                "Queues": [
                    {"Name": "throughput", "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 10}},
                    {"Name": "latency", "Properties": {"LockDuration": "PT1M"}},
                ],
            }
        ]
    }
}


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _throughput(
    client: ServiceBusClient, messages: int, batch_size: int, size: int
) -> tuple[float, float, float]:
    body = b"x" * size
    started = time.perf_counter()
    with client.get_queue_sender("throughput") as sender:
        send_started = time.perf_counter()
        for first in range(0, messages, batch_size):
            batch = sender.create_message_batch()
            for _ in range(min(batch_size, messages - first)):
                batch.add_message(ServiceBusMessage(body))
            sender.send_messages(batch)
        send_seconds = time.perf_counter() - send_started
    received = 0
    with client.get_queue_receiver("throughput", prefetch_count=500, max_wait_time=5) as receiver:
        receive_started = time.perf_counter()
        while received < messages:
            batch_received = receiver.receive_messages(max_message_count=500, max_wait_time=5)
            if not batch_received:
                raise RuntimeError(f"only {received} of {messages} messages came back")
            for message in batch_received:
                receiver.complete_message(message)
            received += len(batch_received)
        receive_seconds = time.perf_counter() - receive_started
    return time.perf_counter() - started, send_seconds, receive_seconds


def _latency(client: ServiceBusClient, samples: int) -> list[float]:
    timings = []
    with client.get_queue_sender("latency") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))
        for index in range(samples):
            started = time.perf_counter()
            sender.send_messages(ServiceBusMessage(f"ping-{index}"))
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=300, help="synchronous sends timed")
    parser.add_argument("--in-memory", action="store_true", help="no SQLite file (default: on disk)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "Config.json"
        config.write_text(json.dumps(CONFIG))
        data = None if args.in_memory else Path(scratch) / "data"
        with start_emulator_process(config, data_dir=data) as emulator:
            assert emulator._process is not None
            broker = psutil.Process(emulator._process.pid)
            me = psutil.Process()
            broker_cpu, client_cpu = _cpu(broker), _cpu(me)
            with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
                total, send_s, receive_s = _throughput(client, args.messages, args.batch, args.size)
                timings = _latency(client, args.samples)
            broker_cpu, client_cpu = _cpu(broker) - broker_cpu, _cpu(me) - client_cpu

    store = "in-memory" if args.in_memory else "SQLite WAL on disk"
    print(
        f"Service Bus emulator benchmark ({store}, {args.messages} x {args.size} B, batches of {args.batch})"
    )
    moving = send_s + receive_s
    print(f"  end to end      {args.messages / moving:9.0f} msg/s   (target >= 1000; send + receive phases)")
    with_links = args.messages / total
    print(f"  incl. links     {with_links:9.0f} msg/s   (+ SDK link open/close, rounded up to 1 s ticks by")
    print("                                   the SDK's keep-alive thread on close)")
    print(f"  send (batched)  {args.messages / send_s:9.0f} msg/s")
    print(f"  receive+complete{args.messages / receive_s:9.0f} msg/s   (prefetch 500)")
    p50 = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[-1]
    print(
        f"  sync send RTT   p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   (target < 20 ms, {len(timings)} samples)"
    )
    cpu_total = broker_cpu + client_cpu
    print(
        f"  CPU seconds     broker {broker_cpu:.2f} s ({broker_cpu / cpu_total:.0%})   "
        f"client {client_cpu:.2f} s ({client_cpu / cpu_total:.0%})"
    )


if __name__ == "__main__":
    main()
