"""Starting and stopping the emulator: in this process (a thread with its own asyncio loop, for
pytest fixtures) or as a subprocess running the CLI (for restart tests and the local stack)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from servicebus_emulator.broker import Broker
from servicebus_emulator.cbs import SharedAccessKey
from servicebus_emulator.config import NamespaceConfig, parse_config
from servicebus_emulator.connection import AmqpConnection, OutputGroup, event_loop
from servicebus_emulator.management import Management
from servicebus_emulator.management_http import ManagementPlane, serve_management
from servicebus_emulator.net import free_port, wait_for_port
from servicebus_emulator.store import Store
from servicebus_emulator.tls import CERTIFICATE_FILE, Certificate, generate_certificate

# Microsoft's Docker emulator uses this well-known development key; so do we, by default.
DEFAULT_KEY = SharedAccessKey("RootManageSharedAccessKey", "SAS_KEY_VALUE")
# Microsoft's emulator: AMQP on 5672, the HTTP management plane (administration client) on 5300.
DEFAULT_AMQP_PORT = 5672
DEFAULT_MANAGEMENT_PORT = 5300
TICK_SECONDS = 0.05
_LOG = logging.getLogger(__name__)


def connection_string(port: int, key: SharedAccessKey | None, host: str = "localhost") -> str:
    shown = key or DEFAULT_KEY  # the SDK insists on a key even when the emulator checks none
    return (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName={shown.name};SharedAccessKey={shown.key};"
        "UseDevelopmentEmulator=true;"
    )


def new_loop(broker: Broker) -> tuple[asyncio.AbstractEventLoop, OutputGroup]:
    """The emulator's event loop and the output group it flushes at the end of each iteration."""
    output = OutputGroup(broker)
    return event_loop(output), output


# Azure's namespace-wide message size: 256 KB in Standard, 1 MB in Premium (whose entities may set
# their own, up to 100 MB).
STANDARD_MESSAGE_SIZE = 256 * 1024
PREMIUM_MESSAGE_SIZE = 1024 * 1024


def namespace_message_size(premium: bool, given: int | None) -> int:
    if given is not None:
        return given
    return PREMIUM_MESSAGE_SIZE if premium else STANDARD_MESSAGE_SIZE


def certificate_directory(data_dir: Path | None) -> Path:
    """Where the management certificate is written: beside the data (one stable path across
    restarts, for REQUESTS_CA_BUNDLE and the like), else a fresh temporary directory."""
    if data_dir is not None:
        return data_dir / "tls"
    return Path(tempfile.mkdtemp(prefix="servicebus-emulator-tls-"))


def default_management_port(amqp_port: int) -> int:
    """Microsoft's layout (5300 beside 5672); any other AMQP port gets a free management port (0),
    so emulators started side by side never collide."""
    return DEFAULT_MANAGEMENT_PORT if amqp_port == DEFAULT_AMQP_PORT else 0


async def serve(
    broker: Broker,
    key: SharedAccessKey | None,
    host: str,
    port: int,
    stop: asyncio.Event,
    ready: Callable[[int, int], None] | None = None,
    management_port: int = 0,
    output: OutputGroup | None = None,
    certificate: Certificate | None = None,
) -> None:
    """Accept AMQP connections and management requests until ``stop`` is set, running the broker's
    timers meanwhile. ``ready`` is called with the bound AMQP and management ports. ``output`` is
    the group the loop flushes (``new_loop``); without one, a group flushing by callback. With a
    ``certificate`` the management port also answers HTTPS."""
    management = Management(broker)
    loop = asyncio.get_running_loop()
    connections: set[AmqpConnection] = set()
    output = output or OutputGroup(broker)  # one commit per loop iteration for all connections

    def accept() -> AmqpConnection:
        connection = AmqpConnection(broker, management, key, on_lost=connections.discard, output=output)
        connections.add(connection)
        return connection

    # The management plane listens first: launchers wait for the AMQP port, and a client may use
    # the management port the moment it does.
    plane = await serve_management(ManagementPlane(broker, key), host, management_port, certificate)
    try:
        server = await loop.create_server(accept, host, port)
    except BaseException:
        await plane.close()
        raise
    bound = int(server.sockets[0].getsockname()[1])
    if ready is not None:
        ready(bound, plane.port)
    try:
        while not stop.is_set():
            try:
                broker.tick()
                broker.commit()
            except Exception:
                # Keep serving: one failed timer pass must not stop the emulator.
                _LOG.exception("broker timer pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_SECONDS)
    finally:
        server.close()
        await plane.close()
        for connection in list(connections):
            connection.shut_down()
        broker.commit()


@dataclass
class RunningEmulator:
    """An emulator serving on ``port``; stop it with ``stop()`` or by leaving the ``with`` block."""

    port: int
    connection_string: str
    broker: Broker | None
    _stop: Callable[[], None]
    management_port: int = 0
    _thread: threading.Thread | None = None
    _process: subprocess.Popen[bytes] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    certificate_path: Path | None = None
    """The management plane's self-signed TLS certificate (PEM), for ``connection_verify``."""
    _temporary: Path | None = None

    @property
    def management_connection_string(self) -> str:
        """For ServiceBusAdministrationClient: the same string on the management port, as with
        Microsoft's emulator (``Endpoint=sb://localhost:5300;...``)."""
        return self.connection_string.replace(f":{self.port};", f":{self.management_port};", 1)

    def runtime_properties(self, entity: str) -> dict[str, Any]:
        """Counts per entity: active, dead-lettered, scheduled, deferred, oldest age (in-process only)."""
        broker, loop = self.broker, self._loop
        if broker is None or loop is None:
            raise RuntimeError("runtime properties are only available for an in-process emulator")

        async def read() -> dict[str, Any]:
            return broker.runtime_properties(entity)

        return asyncio.run_coroutine_threadsafe(read(), loop).result(timeout=10)

    def stop(self) -> None:
        try:
            self._stop()
            if self._thread is not None:
                self._thread.join(timeout=10)
                if self._thread.is_alive():
                    raise RuntimeError("the emulator's thread did not stop within 10 s")
            if self._process is not None:
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout=10)
        finally:
            if self._temporary is not None:
                shutil.rmtree(self._temporary, ignore_errors=True)

    def kill(self) -> None:
        """Kill a subprocess emulator abruptly (SIGKILL), as a crash would."""
        if self._process is None:
            raise RuntimeError("only a subprocess emulator can be killed")
        self._process.kill()
        self._process.wait(timeout=10)
        if self._temporary is not None:  # a killed process cannot remove its own
            shutil.rmtree(self._temporary, ignore_errors=True)

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


EMPTY_NAMESPACE: dict[str, Any] = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns"}]}}


def start(
    config: dict[str, Any] | Path | str | NamespaceConfig | None = None,
    *,
    port: int = 0,
    data_dir: Path | None = None,
    key: SharedAccessKey | None = DEFAULT_KEY,
    host: str = "127.0.0.1",
    max_message_size: int | None = None,
    max_messages_per_entity: int | None = None,
    management_port: int = 0,
    certificate_dir: Path | None = None,
    premium: bool = False,
) -> RunningEmulator:
    """Start an emulator in a background thread of this process and return it; use it as a context
    manager (``with start(config) as emulator:``) to stop it on leaving. ``config`` is a Config.json
    path or document (None: a namespace with no entities); ``port=0`` (and ``management_port=0``)
    picks a free port, ``data_dir=None`` keeps everything in memory. The management certificate is
    written to ``certificate_dir`` (default: ``certificate_directory(data_dir)``; a temporary one is
    removed on stop). ``premium``: a Premium namespace (1 MB messages by default, and entities may set
    their own limit up to 100 MB); ``max_message_size`` overrides the namespace's limit in bytes."""
    if config is None:
        config = EMPTY_NAMESPACE
    namespace = config if isinstance(config, NamespaceConfig) else parse_config(config)
    broker = Broker(
        namespace,
        Store(data_dir),
        max_message_size=namespace_message_size(premium, max_message_size),
        max_messages_per_entity=max_messages_per_entity,
        premium=premium,
    )
    directory = certificate_dir or certificate_directory(data_dir)
    temporary = directory if certificate_dir is None and data_dir is None else None
    certificate = generate_certificate(directory, host)
    ready: Future[tuple[int, int]] = Future()
    loop, output = new_loop(broker)
    stop_event: list[asyncio.Event] = []

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def main() -> None:
            stop_event.append(asyncio.Event())
            await serve(
                broker,
                key,
                host,
                port,
                stop_event[0],
                lambda *ports: ready.set_result(ports),
                management_port,
                output,
                certificate,
            )

        try:
            loop.run_until_complete(main())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise
        finally:
            broker.store.close()
            loop.close()

    thread = threading.Thread(target=run, name="servicebus-emulator", daemon=True)
    thread.start()
    bound, management_bound = ready.result(timeout=30)

    def stop() -> None:
        if not loop.is_closed() and stop_event:
            loop.call_soon_threadsafe(stop_event[0].set)

    return RunningEmulator(
        bound,
        connection_string(bound, key),
        broker,
        stop,
        management_bound,
        _thread=thread,
        _loop=loop,
        certificate_path=certificate.certificate_path,
        _temporary=temporary,
    )


def start_process(
    config_path: Path,
    *,
    port: int | None = None,
    data_dir: Path | None = None,
    key: SharedAccessKey = DEFAULT_KEY,
    timeout: float = 30.0,
    premium: bool = False,
) -> RunningEmulator:
    """Run ``python -m servicebus_emulator`` (the console script) as a subprocess (restart tests, the
    local stack launcher)."""
    port = port or free_port()
    management_port = free_port()
    directory = certificate_directory(data_dir)
    command = [
        sys.executable,
        "-m",
        "servicebus_emulator",
        "--config",
        str(config_path),
        "--port",
        str(port),
        "--management-port",
        str(management_port),
        "--key-name",
        key.name,
        "--key",
        key.key,
        "--certificate-dir",
        str(directory),
        *(["--premium"] if premium else []),
    ]
    command += ["--data", str(data_dir)] if data_dir is not None else ["--in-memory"]
    # A file, not a pipe: a long-lived child must never block writing its log.
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the garbage collector with the Popen
    # The command is this interpreter running our own module with validated arguments.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)  # noqa: S603
    deadline = time.monotonic() + timeout
    try:
        while True:
            if process.poll() is not None:
                errors.seek(0)
                stderr = errors.read().decode(errors="replace")
                raise RuntimeError(f"the emulator exited with code {process.returncode}: {stderr.strip()}")
            try:
                wait_for_port(port, timeout=0.2)
                break
            except TimeoutError:
                if time.monotonic() > deadline:
                    process.kill()
                    process.wait(timeout=10)
                    raise
    except BaseException:
        if data_dir is None:  # the certificate directory was made for this start only
            shutil.rmtree(directory, ignore_errors=True)
        raise

    def stop() -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)

    return RunningEmulator(
        port,
        connection_string(port, key),
        None,
        stop,
        management_port,
        _process=process,
        certificate_path=directory / CERTIFICATE_FILE,
        _temporary=directory if data_dir is None else None,
    )
