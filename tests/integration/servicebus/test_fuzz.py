"""Malformed AMQP against the listener: each bad connection gets a protocol error or is closed, the
broker never crashes, its memory stays flat over 10,000 bad connections, and a well-behaved SDK
client is served throughout."""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from servicebus_emulator import start_process
from servicebus_emulator.amqp_types import Described, UInt, ULong
from servicebus_emulator.codec import encode_value
from servicebus_emulator.frames import AMQP_HEADER, SASL_HEADER, composite, encode_frame

from tests.integration.servicebus.support import emulator_config

BAD_CONNECTIONS = 10_000
WARM_UP = 1_000
# Growth allowed between the warm-up and the end: a leak of even 2 KiB per connection exceeds it.
MAX_RSS_GROWTH = 12 * 1024 * 1024
_OPEN = encode_frame(0, composite("open", container_id="fuzz"))


def _frame(body: bytes, *, size: int | None = None, doff: int = 2) -> bytes:
    return struct.pack(">IBBH", len(body) + 8 if size is None else size, doff, 0, 0) + body


def _encoded(value: object) -> bytes:
    out = bytearray()
    encode_value(value, out)
    return bytes(out)


def _nested_lists(depth: int) -> bytes:
    inner = b"\x40"
    for _ in range(depth):
        inner = b"\xd0" + struct.pack(">II", len(inner) + 4, 1) + inner
    return inner


_DEEP = _nested_lists(5_000)
# Inputs the broker must refuse by closing the connection (with an AMQP close frame when the header
# was fine): (name, bytes-maker). Each maker gets the connection's random generator.
REFUSED: list[tuple[str, Callable[[random.Random], bytes]]] = [
    ("garbage header", lambda rng: b"XMQP" + rng.randbytes(4)),
    ("frame size below 8", lambda rng: AMQP_HEADER + _frame(b"", size=rng.randrange(0, 8))),
    (
        "huge declared frame size",
        lambda rng: AMQP_HEADER + _frame(b"", size=rng.choice([2**31, 2**32 - 1, 10**7])),
    ),
    (
        "data offset 0 or past the frame",
        lambda rng: AMQP_HEADER + _frame(b"\x40" * 8, doff=rng.choice([0, 1, 200])),
    ),
    (
        "unknown descriptor",
        lambda rng: AMQP_HEADER + _frame(_encoded(Described(ULong(rng.randrange(0x40, 0x100)), [UInt(1)]))),
    ),
    (
        "unknown type constructor",
        lambda rng: AMQP_HEADER + _frame(bytes([0x00, 0x53, 0x10, rng.choice([0x01, 0x2F, 0xFF])])),
    ),
    (
        "huge declared binary length",
        lambda rng: (
            AMQP_HEADER
            + _frame(
                b"\x00\x53\x10\xd0"
                + struct.pack(">II", 12, 1)
                + b"\xb0"
                + struct.pack(">I", 2**31 - 1)
                + b"abc"
            )
        ),
    ),
    (
        "huge declared list size",
        lambda rng: AMQP_HEADER + _frame(b"\x00\x53\x10\xd0" + struct.pack(">II", 2**32 - 16, 2**32 - 16)),
    ),
    (
        "nesting deeper than the stack",
        lambda rng: AMQP_HEADER + _frame(b"\x00\x53\x10" + _DEEP),
    ),
    (
        "open then a frame whose body is no performative",
        lambda rng: (
            AMQP_HEADER + _OPEN + _frame(b"\x00\x53" + bytes([rng.randrange(0x19, 0x40)]) + rng.randbytes(40))
        ),
    ),
]
# Inputs that may just be incomplete (the broker waits for the rest): the client then goes away.
ABANDONED: list[tuple[str, Callable[[random.Random], bytes]]] = [
    ("truncated frame", lambda rng: AMQP_HEADER + _frame(rng.randbytes(30), size=200)[:38]),
    ("garbage after the header", lambda rng: AMQP_HEADER + rng.randbytes(rng.randrange(1, 300))),
    ("garbage after the SASL header", lambda rng: SASL_HEADER + rng.randbytes(rng.randrange(1, 300))),
    ("open with a flipped byte", lambda rng: AMQP_HEADER + _flip(_OPEN, rng)),
]


def _flip(data: bytes, rng: random.Random) -> bytes:
    position = rng.randrange(len(data))
    return data[:position] + bytes([data[position] ^ (1 << rng.randrange(8))]) + data[position + 1 :]


def _read_until_closed(sock: socket.socket) -> bytes | None:
    """Everything the broker sends until it closes; None if it kept the connection open."""
    sock.settimeout(30)  # generous: a loaded machine, never a timed assertion
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return received


def _bad_connection(port: int, index: int) -> str | None:
    """Run bad connection ``index``; a description of what went wrong, or None."""
    rng = random.Random(index)
    refused = index % 2 == 0
    name, make = (REFUSED if refused else ABANDONED)[rng.randrange(len(REFUSED if refused else ABANDONED))]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(make(rng))
        if not refused:
            sock.shutdown(socket.SHUT_WR)
        received = _read_until_closed(sock)
    if received is None:
        return f"{name} (#{index}): the broker kept the connection open"
    if refused and name != "garbage header" and b"amqp:" not in received:
        return f"{name} (#{index}): closed without an AMQP error ({received[:60]!r})"
    return None


def test_malformed_connections_are_refused_without_crash_or_leak(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    stop = threading.Event()
    served: list[int] = []
    failures: list[BaseException] = []
    with start_process(config) as emulator:
        assert emulator._process is not None
        broker = psutil.Process(emulator._process.pid)

        def well_behaved_client() -> None:
            try:
                with (
                    ServiceBusClient.from_connection_string(emulator.connection_string) as client,
                    client.get_queue_sender("work") as sender,
                    client.get_queue_receiver("work") as receiver,
                ):
                    while not stop.is_set():
                        sender.send_messages(ServiceBusMessage(f"ok-{len(served)}"))
                        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=30)
                        receiver.complete_message(message)
                        served.append(1)
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        client_thread = threading.Thread(target=well_behaved_client, daemon=True)
        client_thread.start()
        problems: list[str] = []
        with ThreadPoolExecutor(max_workers=4) as pool:
            problems += [
                p for p in pool.map(lambda i: _bad_connection(emulator.port, i), range(WARM_UP)) if p
            ]
            rss_after_warm_up = broker.memory_info().rss
            problems += [
                p
                for p in pool.map(
                    lambda i: _bad_connection(emulator.port, i), range(WARM_UP, BAD_CONNECTIONS)
                )
                if p
            ]
        rss_at_end = broker.memory_info().rss
        rounds_during_fuzz = len(served)
        stop.set()
        client_thread.join(timeout=60)
        assert broker.is_running()
        assert emulator._process.poll() is None, "the broker died"

    assert problems == [], problems[:5]
    assert failures == [], failures
    assert rounds_during_fuzz > 0, "the well-behaved client was not served while the fuzz ran"
    growth = rss_at_end - rss_after_warm_up
    assert growth < MAX_RSS_GROWTH, (
        f"RSS grew {growth / 2**20:.1f} MiB over {BAD_CONNECTIONS - WARM_UP} connections"
    )
