"""Embedded Service Bus emulator benchmark, driven by the real azure-servicebus SDK.

    .venv/bin/python -m bench.servicebus [--messages 5000] [--batch 100] [--size 1024] [--in-memory]

The issue's shape, steady state: batch sends of 100 messages, then one receiver with prefetch 200
completing each message. The emulator runs as a subprocess (SQLite store on disk unless
--in-memory); its CPU is read per phase, so "broker us per receive+complete" is the broker's own
cost. Baseline, same run: a raw loopback echo of the same frames (a Python asyncio echo server in a
subprocess, the same sizes and the same pipelining), the ceiling any broker in Python on this
machine could reach. Also the synchronous send round trip. Figures only, no assertions.

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

from local.ports import free_port, wait_for_port
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
PREFETCH = 200
# Sizes of the frames around one message on the wire (measured from the SDK's traffic): a transfer
# carries the body plus ~190 bytes of header, properties and annotations; a disposition ~30 bytes.
TRANSFER_OVERHEAD = 190
DISPOSITION = 30
_ECHO_SERVER = """
import asyncio, sys
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.transport.write(data)
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
"""


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


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


def _exchange(sock: socket.socket, chunk: bytes, count: int) -> None:
    """Send ``count`` chunks and read the same number of bytes back."""
    sock.sendall(chunk * count)
    expected = len(chunk) * count
    while expected:
        expected -= len(sock.recv(min(expected, 1 << 20)))


def _echo_baseline(messages: int, batch_size: int, size: int) -> tuple[float, float, float]:
    """The same traffic through a raw echo server: batch transfers each answered once (the send
    phase); then per window of PREFETCH messages one write of their transfers, and one round trip
    per message for its disposition and the settled echo (the SDK completes one message at a time).
    Returns send msg/s, receive+complete msg/s and the echo server's CPU us per receive+complete:
    the floor of syscalls and wake-ups that any broker pays on this machine."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", _ECHO_SERVER, str(port)])
    try:
        wait_for_port(port, timeout=30)
        echo = psutil.Process(server.pid)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            batch = b"b" * (batch_size * (size + TRANSFER_OVERHEAD))
            started = time.perf_counter()
            for _ in range(0, messages, batch_size):
                _exchange(sock, batch, 1)
            send_s = time.perf_counter() - started
            transfer, disposition = b"t" * (size + TRANSFER_OVERHEAD), b"d" * DISPOSITION
            cpu = _cpu(echo)
            started = time.perf_counter()
            for first in range(0, messages, PREFETCH):
                window = min(PREFETCH, messages - first)
                _exchange(sock, transfer, window)
                for _ in range(window):
                    _exchange(sock, disposition, 1)
            receive_s = time.perf_counter() - started
            echo_us = (_cpu(echo) - cpu) / messages * 1e6
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
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "Config.json"
        config.write_text(json.dumps(CONFIG))
        data = None if args.in_memory else Path(scratch) / "data"
        with start_emulator_process(config, data_dir=data) as emulator:
            assert emulator._process is not None
            broker = psutil.Process(emulator._process.pid)
            with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
                cpu = _cpu(broker)
                send_s = _send_phase(client, args.messages, args.batch, body)
                send_cpu, cpu = _cpu(broker) - cpu, _cpu(broker)
                receive_s = _receive_phase(client, args.messages)
                receive_cpu = _cpu(broker) - cpu
                timings = _latency(client, args.samples)

    store = "in-memory" if args.in_memory else "SQLite WAL on disk"
    n = args.messages
    end_to_end = n / (send_s + receive_s)
    echo_end_to_end = n / (n / echo_send + n / echo_receive)
    receive_us = receive_cpu / n * 1e6
    print(
        f"Service Bus emulator benchmark ({store}, {n} x {args.size} B, "
        f"batches of {args.batch}, prefetch {PREFETCH})"
    )
    print(f"{'':28}{'emulator':>12}{'echo baseline':>16}   target")
    print(
        f"  end to end (msg/s)        {end_to_end:12.0f}{echo_end_to_end:16.0f}   >= 2000 "
        f"{_verdict(end_to_end, 2000)}"
    )
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
