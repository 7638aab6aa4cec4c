"""The issue's end-to-end shape run as a pipeline: a producer and a consumer at the same time.

A producer process sends batches of ``batch`` messages while a consumer process (prefetch 200)
receives and completes each one, both against the same emulator, each with its own SDK client in
its own process (two clients in one Python process would share a GIL, which no real producer and
consumer do). Before the clock starts the producer sends one warm-up message and the consumer
receives and completes it, so both links are open; then the parent releases the producer.

End to end = messages / (first send started -> last completion acknowledged). Both instants are
read with ``time.monotonic()``, which on Linux is the one system-wide CLOCK_MONOTONIC, so two
processes' readings compare. A message's latency is its broker enqueued time (``x-opt-enqueued-time``,
the broker's wall clock in ms) to its completion being acknowledged (the consumer's wall clock).

The echo baseline of the same shape: the same frames through the raw echo server, a producer
connection (each batch's transfer answered once) and a consumer connection (per window of 200 the
transfers in one write, then one round trip per disposition) driven at the same time by two
processes. The echo cannot gate the consumer on the producer's messages; it is the ceiling of the
frames and round trips alone.
"""

from __future__ import annotations

import multiprocessing
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier, Event

import psutil

from local.ports import free_port, wait_for_port

PREFETCH = 200
# Sizes of the frames around one message on the wire (measured from the SDK's traffic): a transfer
# carries the body plus ~190 bytes of header, properties and annotations; a disposition ~30 bytes.
TRANSFER_OVERHEAD = 190
DISPOSITION = 30
ECHO_SERVER = """
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
_SPAWN = multiprocessing.get_context("spawn")  # no forked copy of the parent's SDK client or loop
_START_TIMEOUT_S = 120.0  # generous: five engineers share two cores


@dataclass(frozen=True)
class PipelineResult:
    seconds: float  # first send started -> last completion acknowledged
    latencies_ms: list[float]  # enqueue -> completion acknowledged, one a message
    broker_cpu_s: float  # the broker's CPU over the window
    producer_cpu_s: float
    consumer_cpu_s: float


def process_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def exchange(sock: socket.socket, chunk: bytes, count: int) -> None:
    """Send ``count`` chunks and read the same number of bytes back."""
    sock.sendall(chunk * count)
    expected = len(chunk) * count
    while expected:
        expected -= len(sock.recv(min(expected, 1 << 20)))


def _producer(
    connection_string: str, queue: str, messages: int, batch_size: int, size: int, go: Event, out: Connection
) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    body = b"x" * size
    client = ServiceBusClient.from_connection_string(connection_string)
    with client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(b"warm-up"))
        if not go.wait(_START_TIMEOUT_S):
            return
        cpu, started = time.process_time(), time.monotonic()
        for first in range(0, messages, batch_size):
            batch = sender.create_message_batch()
            for _ in range(min(batch_size, messages - first)):
                batch.add_message(ServiceBusMessage(body))
            sender.send_messages(batch)
        out.send((started, time.process_time() - cpu))


def _consumer(connection_string: str, queue: str, messages: int, ready: Event, out: Connection) -> None:
    from azure.servicebus import ServiceBusClient

    latencies: list[float] = []
    completed = 0
    client = ServiceBusClient.from_connection_string(connection_string)
    with client, client.get_queue_receiver(queue, prefetch_count=PREFETCH) as receiver:
        for message in receiver.receive_messages(max_message_count=1, max_wait_time=_START_TIMEOUT_S):
            receiver.complete_message(message)
        ready.set()
        cpu = time.process_time()
        done = time.monotonic()
        while completed < messages:
            # Tuned for throughput: take everything the prefetch buffer holds in one call
            # (max_message_count = prefetch), so a consumer that falls behind drains 200 a call
            # and never waits. One that keeps up gets a call back once the buffer fills or 0.2 s
            # after its first new message (the SDK's further-pull window): that bounds latency,
            # not throughput, since transfers keep arriving into the buffer meanwhile. Asking for
            # no more than remain stands for an endless stream, whose last short call never
            # comes; max_wait_time only bounds an idle queue (5 s: here, a stalled producer).
            # Measured: 1, 50 or 200 a call gave the same rate; the SDK grants its next 200
            # credit only once the last is used, whatever is asked (emulator README, Throughput).
            wanted = min(PREFETCH, messages - completed)
            batch = receiver.receive_messages(max_message_count=wanted, max_wait_time=5)
            if not batch:
                raise RuntimeError(f"only {completed} of {messages} messages came back")
            for message in batch:
                receiver.complete_message(message)
                done = time.monotonic()
                completed += 1
                enqueued = message.enqueued_time_utc
                if enqueued is not None:  # always set by a broker; None only before a send
                    latencies.append((time.time() - enqueued.timestamp()) * 1000)
        out.send((done, latencies, time.process_time() - cpu))


def run_pipeline(
    connection_string: str, queue: str, broker: psutil.Process, messages: int, batch_size: int, size: int
) -> PipelineResult:
    ready, go = _SPAWN.Event(), _SPAWN.Event()
    producer_out, producer_in = _SPAWN.Pipe(duplex=False)
    consumer_out, consumer_in = _SPAWN.Pipe(duplex=False)
    producer = _SPAWN.Process(
        target=_producer, args=(connection_string, queue, messages, batch_size, size, go, producer_in)
    )
    consumer = _SPAWN.Process(target=_consumer, args=(connection_string, queue, messages, ready, consumer_in))
    consumer.start()
    producer.start()
    try:
        if not ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("the consumer never received the warm-up message")
        cpu = process_cpu(broker)
        go.set()
        if not consumer_out.poll(_START_TIMEOUT_S) or not producer_out.poll(_START_TIMEOUT_S):
            raise RuntimeError("the pipeline did not finish")
        done, latencies, consumer_cpu = consumer_out.recv()
        broker_cpu = process_cpu(broker) - cpu
        started, producer_cpu = producer_out.recv()
    finally:
        for child in (producer, consumer):
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    return PipelineResult(done - started, latencies, broker_cpu, producer_cpu, consumer_cpu)


def _echo_producer(
    port: int, messages: int, batch_size: int, size: int, go: Barrier, out: Connection
) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        batch = b"b" * (batch_size * (size + TRANSFER_OVERHEAD))
        go.wait(_START_TIMEOUT_S)  # both connected: start together
        started = time.monotonic()
        for _ in range(0, messages, batch_size):
            exchange(sock, batch, 1)
        out.send((started, time.monotonic()))


def _echo_consumer(port: int, messages: int, size: int, go: Barrier, out: Connection) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transfer, disposition = b"t" * (size + TRANSFER_OVERHEAD), b"d" * DISPOSITION
        go.wait(_START_TIMEOUT_S)  # both connected: start together
        started = time.monotonic()
        for first in range(0, messages, PREFETCH):
            window = min(PREFETCH, messages - first)
            exchange(sock, transfer, window)
            for _ in range(window):
                exchange(sock, disposition, 1)
        out.send((started, time.monotonic()))


def echo_pipeline(messages: int, batch_size: int, size: int) -> float:
    """End-to-end msg/s of the same frames through the echo server, producer and consumer at once."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(port)])
    go = _SPAWN.Barrier(3, timeout=_START_TIMEOUT_S)
    pipes = [_SPAWN.Pipe(duplex=False) for _ in range(2)]
    children = [
        _SPAWN.Process(target=_echo_producer, args=(port, messages, batch_size, size, go, pipes[0][1])),
        _SPAWN.Process(target=_echo_consumer, args=(port, messages, size, go, pipes[1][1])),
    ]
    try:
        wait_for_port(port, timeout=30)
        for child in children:
            child.start()
        go.wait()
        spans = [receiving.recv() for receiving, _ in pipes]
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
        server.kill()
        server.wait(timeout=10)
    started = min(float(start) for start, _ in spans)
    return messages / (max(float(end) for _, end in spans) - started)


def percentiles(latencies_ms: list[float]) -> tuple[float, float]:
    return statistics.median(latencies_ms), statistics.quantiles(latencies_ms, n=20)[-1]
