"""Wire-level behaviour (idle timeout, bad headers) and the command-line entry points."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient
from servicebus_emulator import RunningEmulator, start_process
from servicebus_emulator.amqp_types import Described, Symbol, UByte, UInt, ULong
from servicebus_emulator.frames import (
    AMQP_HEADER,
    FRAME_HEADER,
    composite,
    encode_frame,
    fields_of,
    parse_frame_body,
)

from local.ports import free_port, wait_for_port
from tests.integration.servicebus.support import emulator_config, stock_admin_client


def _read_for(sock: socket.socket, seconds: float) -> bytes:
    sock.settimeout(0.05)
    data = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    return data


def _parse_frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Frames in ``data`` as (performative, fields); an empty (heartbeat) frame is ("empty", {})."""
    found: list[tuple[str, dict[str, Any]]] = []
    offset = 0
    while offset + 8 <= len(data):
        size = FRAME_HEADER.unpack_from(data, offset)[0]
        if size == 8:
            found.append(("empty", {}))
        else:
            name, fields, _ = parse_frame_body(memoryview(data[offset + 8 : offset + size]))
            found.append((name, fields))
        offset += size
    return found


def test_idle_timeout_is_kept_alive_with_empty_frames(emulator: RunningEmulator) -> None:
    """A client that asks for a 300 ms idle timeout receives empty frames while nothing else happens."""
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        sock.sendall(AMQP_HEADER)
        sock.sendall(encode_frame(0, composite("open", container_id="raw", idle_time_out=UInt(300))))
        data = _read_for(sock, 1.0)
    assert data.startswith(AMQP_HEADER)
    names = [name for name, _ in _parse_frames(data[len(AMQP_HEADER) :])]
    assert names[0] == "open"
    assert names.count("empty") >= 2


def test_unknown_protocol_header_gets_ours_and_a_close(emulator: RunningEmulator) -> None:
    """A non-AMQP client is answered with the AMQP 1.0 header, then the connection ends."""
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        data = _read_for(sock, 1.0)
    assert data.startswith(AMQP_HEADER)


def test_cli_prints_connection_string_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`python -m servicebus_emulator` prints working data and management connection strings and the
    management certificate it generated (which the stock administration client trusts), and exits 0 on
    SIGTERM, removing the temporary certificate."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servicebus_emulator",
            "--config",
            str(config),
            "--port",
            str(port),
            "--in-memory",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith(f"Endpoint=sb://localhost:{port};")
        assert "UseDevelopmentEmulator=true" in line
        management, marker = process.stdout.readline().strip().rsplit("  ", 1)
        assert marker == "(management)"
        label, certificate = process.stdout.readline().strip().split(": ", 1)
        assert label == "Management TLS certificate"
        wait_for_port(port, timeout=30)
        with (
            ServiceBusClient.from_connection_string(line) as client,
            client.get_queue_sender("work") as sender,
        ):
            sender.send_messages(ServiceBusMessage("via cli"))
        with ServiceBusAdministrationClient.from_connection_string(
            management, connection_verify=certificate, retry_total=0
        ) as admin:
            assert admin.get_queue_runtime_properties("work").active_message_count == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
        assert not Path(certificate).exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_cli_never_prints_a_key_of_the_users_own(tmp_path: Path) -> None:
    """With --key, the printed connection string masks the key; the development key is printed whole."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    secret = "my-own-secret-key-7f3a"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servicebus_emulator",
            "--config",
            str(config),
            "--port",
            str(free_port()),
            "--in-memory",
            "--key",
            secret,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert secret not in line
        assert "SharedAccessKey=<the --key value>;" in line
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


def test_a_subprocess_emulator_serves_its_management_plane(tmp_path: Path) -> None:
    """`python -m servicebus_emulator --management-port` answers the administration client with live
    counts."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    data = tmp_path / "data"
    with (
        start_process(config, data_dir=data) as emulator,
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
    ):
        with client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c")])
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.dead_letter_message(message, reason="Bad")
        with stock_admin_client(emulator) as admin:
            counts = admin.get_queue_runtime_properties("work")
    assert counts.active_message_count == 2
    assert counts.dead_letter_message_count == 1


def test_transfers_respect_the_session_incoming_window(start: Callable[..., RunningEmulator]) -> None:
    """With link credit 10 but a session incoming window of 2, the broker sends 2 transfers, then the
    rest once the client's flow opens the window."""
    emulator = start(key=None)
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender("work") as sender,
    ):
        sender.send_messages([ServiceBusMessage(f"w{index}") for index in range(5)])
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        sock.sendall(AMQP_HEADER)
        _read_for(sock, 0.2)
        session_fields = {
            "next_outgoing_id": UInt(0),
            "incoming_window": UInt(2),
            "outgoing_window": UInt(100),
        }
        sock.sendall(
            encode_frame(0, composite("open", container_id="raw"))
            + encode_frame(0, composite("begin", **session_fields))
            + encode_frame(
                0,
                composite(
                    "attach",
                    name="raw-receiver",
                    handle=UInt(0),
                    role=True,
                    snd_settle_mode=UByte(1),
                    source=composite("source", address="work"),
                    target=composite("target", address="raw"),
                ),
            )
            + encode_frame(
                0,
                composite(
                    "flow",
                    next_incoming_id=UInt(0),
                    **{k: v for k, v in session_fields.items() if k != "next_outgoing_id"},
                    next_outgoing_id=UInt(0),
                    handle=UInt(0),
                    delivery_count=UInt(0),
                    link_credit=UInt(10),
                ),
            )
        )
        first = [name for name, _ in _parse_frames(_read_for(sock, 1.0)) if name == "transfer"]
        sock.sendall(
            encode_frame(
                0,
                composite(
                    "flow",
                    next_incoming_id=UInt(2),
                    incoming_window=UInt(100),
                    next_outgoing_id=UInt(0),
                    outgoing_window=UInt(100),
                ),
            )
        )
        rest = [name for name, _ in _parse_frames(_read_for(sock, 1.0)) if name == "transfer"]
    assert (len(first), len(rest)) == (2, 3)


def test_garbage_frames_cost_only_their_connection(emulator: RunningEmulator) -> None:
    """Malformed frames close that connection with an error; the emulator keeps serving others."""
    garbage = [
        b"\x00\x00\x00\x10\x02\x00\x00\x00" + b"\xff" * 8,  # unknown type constructor
        b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x99\x45",  # unknown performative
        b"\xff\xff\xff\xff\x02\x00\x00\x00",  # frame larger than the advertised maximum
        encode_frame(0, composite("open", container_id="x"))[:-3] + b"\x00\x00\x00",  # truncated list
    ]
    for frame in garbage:
        with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
            sock.sendall(AMQP_HEADER + frame)
            data = _read_for(sock, 0.5)
            assert data.startswith(AMQP_HEADER)
            names = [name for name, _ in _parse_frames(data[len(AMQP_HEADER) :])]
            assert names[-1:] == ["close"]
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender("work") as sender,
    ):
        sender.send_messages(ServiceBusMessage("still serving"))
    assert emulator.runtime_properties("work")["active_message_count"] == 1


def test_a_transaction_coordinator_is_refused_with_not_implemented(
    start: Callable[..., RunningEmulator],
) -> None:
    """A link to the coordinator (AMQP transactions) is answered like any refused link, an attach
    without target and then a detach naming amqp:not-implemented, and the connection stays usable."""
    emulator = start(key=None)
    coordinator = Described(ULong(0x30), [[Symbol("amqp:local-transactions")]])
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=5) as sock:
        sock.sendall(AMQP_HEADER)
        _read_for(sock, 0.2)
        sock.sendall(
            encode_frame(0, composite("open", container_id="raw"))
            + encode_frame(
                0,
                composite(
                    "begin", next_outgoing_id=UInt(0), incoming_window=UInt(100), outgoing_window=UInt(100)
                ),
            )
            + encode_frame(
                0,
                composite(
                    "attach",
                    name="raw-coordinator",
                    handle=UInt(0),
                    role=False,
                    source=composite("source", address="raw"),
                    target=coordinator,
                ),
            )
        )
        frames = _parse_frames(_read_for(sock, 1.0))
    names = [name for name, _ in frames]
    assert names[:2] == ["open", "begin"]
    attach = next(fields for name, fields in frames if name == "attach")
    assert attach["target"] is None
    detach = next(fields for name, fields in frames if name == "detach")
    assert detach["closed"] is True
    assert fields_of(detach["error"])["condition"] == "amqp:not-implemented"
    assert "close" not in names


def test_cli_with_port_0_prints_the_ports_it_bound(tmp_path: Path) -> None:
    """`--port 0` lets the system choose: the printed strings name the bound ports, not 0."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    command = [
        sys.executable,
        "-m",
        "servicebus_emulator",
        "--config",
        str(config),
        "--port",
        "0",
        "--in-memory",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        data, management = (process.stdout.readline().split(";")[0] for _ in range(2))
        ports = [int(line.rsplit(":", 1)[1]) for line in (data, management)]
        assert 0 not in ports
        assert ports[0] != ports[1]
        wait_for_port(ports[0], timeout=30)
        wait_for_port(ports[1], timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
