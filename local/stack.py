"""The local stack: Azurite, the embedded Service Bus emulator and the Functions host, together.

``python -m local.stack`` brings all three up (each a child process), waits until each one answers,
prints the endpoints and serves until Ctrl-C; then it stops them in reverse order so that nothing is
left running. ``start_stack()`` does the same for the demo and the end-to-end tests, and also lets them
kill or restart one component mid-run.

The emulator loads the Config.json generated from the topology spec (unclamped: our emulator accepts
the service's real ranges, e.g. lock durations of a few seconds). The host gets a generated
local.settings.json holding the emulator and Azurite connection strings under the connection names
the Function App binds to.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from claimcheck.settings import SERVICEBUS_CONNECTION, STORAGE_CONNECTION

from infra.emulator_config import write_emulator_config
from infra.topology import Topology, load_topology
from local.azurite import Azurite, start_azurite
from local.ports import free_port, wait_for_port
from local.processes import die_with_parent
from local.servicebus import DEFAULT_KEY, connection_string

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTION_APP = REPO_ROOT / "functions" / "function_app.py"
_STOP_GRACE_SECONDS = 15.0
_READY_TIMEOUT_SECONDS = 60.0


def _accepts_connections(port: int) -> bool:
    try:
        wait_for_port(port, timeout=0)
    except TimeoutError:
        return False
    return True


@dataclass
class ChildProcess:
    """One component run as a child process in its own process group, logging to a file."""

    name: str
    command: list[str]
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, timeout: float = _READY_TIMEOUT_SECONDS) -> None:
        """Start the process and wait until its port accepts connections (or it exits: then raise)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own Python modules
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        deadline = time.monotonic() + timeout
        while not _accepts_connections(self.port):
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"{self.name} exited with {code} while starting; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
        self._signal(signal.SIGTERM, wait=_STOP_GRACE_SECONDS)

    def kill(self) -> None:
        """SIGKILL at once: a crash, as far as the rest of the stack can tell."""
        self._signal(signal.SIGKILL, wait=_STOP_GRACE_SECONDS)

    def _signal(self, signal_number: int, *, wait: float) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal_number)
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=wait)
        self.process = None


@dataclass
class LocalStack:
    """A running local stack. Stop it with ``stop()`` or by leaving its ``with`` block."""

    work_dir: Path
    azurite: Azurite
    emulator: ChildProcess
    host: ChildProcess
    owns_work_dir: bool = False

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.host.port}/api"

    @property
    def servicebus_connection_string(self) -> str:
        return connection_string(self.emulator.port, DEFAULT_KEY, host="127.0.0.1")

    @property
    def storage_connection_string(self) -> str:
        return self.azurite.connection_string

    def restart_emulator(self) -> None:
        """Stop the emulator and start it again on the same port with the same data folder."""
        self.emulator.stop()
        self.emulator.start()

    def stop(self) -> None:
        """Stop the host first (it settles in-flight work), then the emulator, then Azurite."""
        try:
            self.host.stop()
            self.emulator.stop()
        finally:
            # A throwaway stack's Storage data is about to be deleted: no need to let Azurite flush it.
            self.azurite.stop(flush=not self.owns_work_dir)
            if self.owns_work_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_stack(
    *,
    work_dir: Path | None = None,
    topology: Topology | None = None,
    host_port: int | None = None,
    emulator_port: int | None = None,
    app_path: Path = FUNCTION_APP,
    app_settings: Mapping[str, str] | None = None,
) -> LocalStack:
    """Start Azurite, the emulator and the Functions host; wait until each is ready.

    ``work_dir`` keeps the emulator data, Config.json, local.settings.json and the logs (a throwaway
    folder when omitted). Ports default to free ones. ``app_settings`` are added to the host's
    local.settings.json values (e.g. a smaller inline threshold for a test).
    """
    owns = work_dir is None
    folder = Path(tempfile.mkdtemp(prefix="claimcheck-stack-")) if work_dir is None else work_dir
    folder.mkdir(parents=True, exist_ok=True)
    config_path = write_emulator_config(topology or load_topology(), folder / "Config.json", clamp=False)
    azurite = start_azurite(folder / "azurite")
    emulator = host = None
    try:
        emulator = _emulator_process(folder, config_path, emulator_port or free_port())
        emulator.start()
        bus_connection = connection_string(emulator.port, DEFAULT_KEY, host="127.0.0.1")
        settings_path = _write_local_settings(
            folder, azurite.connection_string, bus_connection, app_settings or {}
        )
        port = host_port or free_port()
        host = ChildProcess(
            name="functions host",
            command=[
                sys.executable,
                "-m",
                "local.functions_host",
                "--app",
                str(app_path),
                "--port",
                str(port),
                "--settings",
                str(settings_path),
            ],
            port=port,
            log_path=folder / "functions-host.log",
        )
        host.start()
    except BaseException:
        for started in (host, emulator):
            if started is not None:
                started.stop()
        azurite.stop(flush=not owns)
        if owns:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return LocalStack(folder, azurite, emulator, host, owns)


def _emulator_process(folder: Path, config_path: Path, port: int) -> ChildProcess:
    data = folder / "servicebus"
    data.mkdir(exist_ok=True)
    return ChildProcess(
        name="Service Bus emulator",
        command=[
            sys.executable,
            "-m",
            "local.servicebus",
            "--config",
            str(config_path),
            "--port",
            str(port),
            "--data",
            str(data),
        ],
        port=port,
        log_path=folder / "servicebus.log",
    )


def _write_local_settings(folder: Path, storage: str, servicebus: str, extra: Mapping[str, str]) -> Path:
    """local.settings.json for the host: the names the app binds to, as Core Tools would read them."""
    values = {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "AzureWebJobsStorage": storage,
        SERVICEBUS_CONNECTION: servicebus,
        STORAGE_CONNECTION: storage,
        "CLAIMCHECK_ENVIRONMENT": "local",
        **extra,
    }
    path = folder / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": values}, indent=2), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.stack", description=__doc__)
    parser.add_argument(
        "--port", type=int, default=7071, help="Functions host HTTP port (default: %(default)s)"
    )
    parser.add_argument(
        "--servicebus-port", type=int, default=5672, help="emulator AMQP port (default: %(default)s)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=REPO_ROOT / ".local-stack",
        help="where data, settings and logs go (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    stop_requested = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop_requested.set())
    print("Starting Azurite, the Service Bus emulator and the Functions host...", flush=True)
    with start_stack(work_dir=args.data, host_port=args.port, emulator_port=args.servicebus_port) as stack:
        print(f"Functions API      {stack.api_url}  (POST /documents, GET /work-items/{{id}})")
        print(f"Service Bus        amqp://127.0.0.1:{stack.emulator.port}  (see local.settings.json)")
        print(f"Blob storage       {stack.azurite.blob_endpoint}")
        print(f"Table storage      {stack.azurite.table_endpoint}")
        print(f"Logs and data      {stack.work_dir}")
        print("Press Ctrl-C to stop.", flush=True)
        stop_requested.wait()
        print("Stopping...", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
