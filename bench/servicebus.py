"""Embedded Service Bus emulator benchmark, driven by the real azure-servicebus SDK.

    .venv/bin/python -m bench.servicebus [--messages 5000] [--batch 100] [--size 1024] [--in-memory]

The issue's shape, steady state: batch sends of 100 messages and one receiver with prefetch 200
completing each message. The emulator runs as a subprocess (SQLite store on disk unless
--in-memory); its CPU is read per phase, so "broker us per receive+complete" is the broker's own
cost. Each line is printed beside a same-run baseline: a raw loopback echo of the same frames (a
Python asyncio echo server in a subprocess, the same sizes and the same pipelining), the ceiling
any broker in Python on this machine could reach. Figures only, no assertions. The lines:

- end to end (producer + consumer at once): a producer process sending batches of 100 and a
  consumer process (prefetch 200, completing each message) run at the same time against the same
  emulator (bench/servicebus_pipeline.py); messages / (first send started -> last completion
  acknowledged). Baseline: the same frames sent by two processes at once over two connections.
  Also the p50/p95 latency of a message from its broker enqueued time to its completion, the
  broker's CPU share of one core over that window and the producer's and consumer's CPU.
- sequential send then receive: the two phases below one after the other in one process,
  messages / (send time + receive time), i.e. their harmonic combination (the figure this bench
  called "end to end" before the pipeline existed). Baseline: the same from the echo phases.
- batch send: n messages in batches of 100 with one sender, nothing receiving.
- receive+complete: then one receiver, prefetch 200, completes them all; broker CPU over that
  phase divided by n is "broker CPU/receive+complete" (baseline: the echo server's CPU).
- sync send RTT: one message a send, the SDK's round trip.

Targets (issue 15): >= 2,000 msg/s end to end, >= 5,000 msg/s batch send, broker CPU <= 150 us per
receive+complete.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from servicebus_emulator import start_process

from bench.servicebus_pipeline import (
    DISPOSITION,
    ECHO_SERVER,
    PREFETCH,
    TRANSFER_OVERHEAD,
    echo_pipeline,
    exchange,
    percentiles,
    process_cpu,
    run_pipeline,
)
from local.ports import free_port, wait_for_port

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


def _send_phase(client: ServiceBusClient, messages: int, batch_size: int, body: bytes) -> float:
    with client.get_queue_sender("throughput") as sender:
        started = time.perf_counter()
        for first in range(0, messages, batch_size):
            batch = sender.create_message_batch()
            for _ in range(min(batch_size, messages - first)):
                batch.add_message(ServiceBusMessage(body))
            sender.send_messages(batch)
        return time.perf_counter() - started


def _receive_phase(client: ServiceBusClient, messages: int) -> float:
    received = 0
    with client.get_queue_receiver("throughput", prefetch_count=PREFETCH, max_wait_time=5) as receiver:
        started = time.perf_counter()
        # Never ask for more than remain: the SDK waits out max_wait_time on a short last batch.
        while received < messages:
            wanted = min(PREFETCH, messages - received)
            batch = receiver.receive_messages(max_message_count=wanted, max_wait_time=5)
            if not batch:
                raise RuntimeError(f"only {received} of {messages} messages came back")
            for message in batch:
                receiver.complete_message(message)
            received += len(batch)
        return time.perf_counter() - started


def _latency(client: ServiceBusClient, samples: int) -> list[float]:
    timings = []
    with client.get_queue_sender("latency") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))
        for index in range(samples):
            started = time.perf_counter()
            sender.send_messages(ServiceBusMessage(f"ping-{index}"))
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def _echo_baseline(messages: int, batch_size: int, size: int) -> tuple[float, float, float]:
    """The same traffic through a raw echo server: batch transfers each answered once (the send
    phase); then per window of PREFETCH messages one write of their transfers, and one round trip
    per message for its disposition and the settled echo (the SDK completes one message at a time).
    Returns send msg/s, receive+complete msg/s and the echo server's CPU us per receive+complete:
    the floor of syscalls and wake-ups that any broker pays on this machine."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(port)])
    try:
        wait_for_port(port, timeout=30)
        echo = psutil.Process(server.pid)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            batch = b"b" * (batch_size * (size + TRANSFER_OVERHEAD))
            started = time.perf_counter()
            for _ in range(0, messages, batch_size):
                exchange(sock, batch, 1)
            send_s = time.perf_counter() - started
            transfer, disposition = b"t" * (size + TRANSFER_OVERHEAD), b"d" * DISPOSITION
            cpu = process_cpu(echo)
            started = time.perf_counter()
            for first in range(0, messages, PREFETCH):
                window = min(PREFETCH, messages - first)
                exchange(sock, transfer, window)
                for _ in range(window):
                    exchange(sock, disposition, 1)
            receive_s = time.perf_counter() - started
            echo_us = (process_cpu(echo) - cpu) / messages * 1e6
    finally:
        server.kill()
        server.wait(timeout=10)
    return messages / send_s, messages / receive_s, echo_us


def _verdict(value: float, target: float, higher_is_better: bool = True) -> str:
    met = value >= target if higher_is_better else value <= target
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=200, help="synchronous sends timed")
    parser.add_argument("--in-memory", action="store_true", help="no SQLite file (default: on disk)")
    args = parser.parse_args()
    body = b"x" * args.size

    echo_send, echo_receive, echo_us = _echo_baseline(args.messages, args.batch, args.size)
    echo_pipelined = echo_pipeline(args.messages, args.batch, args.size)
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "Config.json"
        config.write_text(json.dumps(CONFIG))
        data = None if args.in_memory else Path(scratch) / "data"
        with start_process(config, data_dir=data) as emulator:
            assert emulator._process is not None
            broker = psutil.Process(emulator._process.pid)
            with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
                cpu = process_cpu(broker)
                send_s = _send_phase(client, args.messages, args.batch, body)
                send_cpu, cpu = process_cpu(broker) - cpu, process_cpu(broker)
                receive_s = _receive_phase(client, args.messages)
                receive_cpu = process_cpu(broker) - cpu
                timings = _latency(client, args.samples)
            # The queue is empty again: the pipeline runs on it with clients of its own processes.
            pipeline = run_pipeline(
                emulator.connection_string, "throughput", broker, args.messages, args.batch, args.size
            )

    store = "in-memory" if args.in_memory else "SQLite WAL on disk"
    n = args.messages
    end_to_end = n / pipeline.seconds
    sequential = n / (send_s + receive_s)
    echo_sequential = n / (n / echo_send + n / echo_receive)
    receive_us = receive_cpu / n * 1e6
    print(
        f"Service Bus emulator benchmark ({store}, {n} x {args.size} B, "
        f"batches of {args.batch}, prefetch {PREFETCH})"
    )
    print(f"{'':28}{'emulator':>12}{'echo baseline':>16}   target")
    print(
        f"  end to end (msg/s)        {end_to_end:12.0f}{echo_pipelined:16.0f}   >= 2000 "
        f"{_verdict(end_to_end, 2000)}"
    )
    latency_p50, latency_p95 = percentiles(pipeline.latencies_ms)
    print(f"    enqueue -> complete latency  p50 {latency_p50:.0f} ms  p95 {latency_p95:.0f} ms")
    print(
        f"    CPU over the window: broker {pipeline.broker_cpu_s / pipeline.seconds:.0%} of a core "
        f"({pipeline.broker_cpu_s / n * 1e6:.0f} us a message), producer "
        f"{pipeline.producer_cpu_s / pipeline.seconds:.0%}, consumer "
        f"{pipeline.consumer_cpu_s / pipeline.seconds:.0%}"
    )
    print(f"  sequential send then receive {sequential:9.0f}{echo_sequential:16.0f}")
    print(
        f"  batch send (msg/s)        {n / send_s:12.0f}{echo_send:16.0f}   >= 5000 "
        f"{_verdict(n / send_s, 5000)}"
    )
    print(f"  receive+complete (msg/s)  {n / receive_s:12.0f}{echo_receive:16.0f}")
    print(
        f"  broker CPU/receive+complete {receive_us:8.0f} us{echo_us:13.0f} us   <= 150 us "
        f"{_verdict(receive_us, 150, higher_is_better=False)}"
    )
    print(f"  broker CPU/message sent     {send_cpu / n * 1e6:8.0f} us")
    p50 = statistics.median(timings)
    p95 = statistics.quantiles(timings, n=20)[-1]
    print(f"  sync send RTT  p50 {p50:.2f} ms  p95 {p95:.2f} ms  ({len(timings)} samples)")


if __name__ == "__main__":
    main()
