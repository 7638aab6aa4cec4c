"""The local stack: Azurite, the embedded Service Bus emulator, the local token issuer and the
Functions host, together.

``python -m local.stack`` brings them all up (each a child process), waits until each one answers,
prints the endpoints and serves until Ctrl-C; then it stops them in reverse order so that nothing is
left running. It refuses to start when a port it needs is taken (naming the port), and if a component
dies while it serves, it says which one, stops the others and exits 1: a half-running stack would
answer some calls and time out on others, which is worse than an honest failure.

``start_stack()`` does the same for the demo, the end-to-end tests and the chaos run, without that
supervision: they kill and restart components on purpose with ``LocalStack.kill(name)`` /
``start(name)`` / ``restart(name)`` (names in ``COMPONENTS``), and can ask ``LocalStack.exited()``.

The emulator loads the Config.json generated from the topology spec (unclamped: our emulator accepts
the service's real ranges, e.g. lock durations of a few seconds). The host gets a generated
local.settings.json holding the emulator and Azurite connection strings under the connection names
the Function App binds to, and the issuer's URL, audience and access table (local/identity/), so
that every HTTP call needs a token signed by the issuer: ``LocalStack.token()`` mints one.
"""

from __future__ import annotations

import os
import signal
import sys

if __name__ == "__main__":
    # Ctrl-C while the modules below load (a second or so, before anything has started): one line,
    # not an import traceback. main() puts the default handler back.
    signal.signal(signal.SIGINT, lambda *_: (print("interrupted", file=sys.stderr), os._exit(130)))

import argparse
import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, get_args

from claimcheck.access import ACCESS_TABLE_SETTING
from claimcheck.adapters.azure import provision_storage
from claimcheck.adapters.telemetry_setup import TELEMETRY_DIR_SETTING
from claimcheck.settings import (
    AUDIENCE_SETTING,
    HOST_REQUEST_LIMIT_SETTING,
    ISSUER_SETTING,
    JWKS_URI_SETTING,
    SERVICEBUS_CONNECTION,
    STORAGE_CONNECTION,
    Settings,
    host_request_body_limit,
)
from servicebus_emulator import DEFAULT_KEY, connection_string
from servicebus_emulator.server import default_management_port

from infra.app_settings import topology_settings
from infra.emulator_config import write_emulator_config
from infra.topology import Topology, load_topology
from local.azurite import Azurite, AzuriteNotInstalled, start_azurite
from local.functions_host.instances import (
    InstanceCountRefused,
    configured_instance_count,
    parse_instance_count,
)
from local.identity import (
    SigningKey,
    TokenMinter,
    identity_named,
    local_access_table,
    local_consumer_settings,
)
from local.identity.keys import jwks_url
from local.ports import PortInUse, ensure_port_free, free_port
from local.processes import ChildProcess, interrupt_handler, raise_if_interrupted

REPO_ROOT = Path(__file__).resolve().parent.parent
TELEMETRY_DIR = "telemetry"  # under the stack's folder: spans.jsonl, metrics.jsonl
FUNCTION_APP = REPO_ROOT / "functions" / "function_app.py"
# How often the launcher looks at its children while it serves.
_SUPERVISE_SECONDS = 0.5

Component = Literal["azurite", "emulator", "issuer", "host"]
COMPONENTS: tuple[Component, ...] = get_args(Component)


@dataclass(frozen=True)
class ExitedComponent:
    name: Component
    exit_code: int
    log_path: Path

    def __str__(self) -> str:
        how = (
            f"was killed by signal {-self.exit_code}"
            if self.exit_code < 0
            else f"exited with {self.exit_code}"
        )
        return f"{_TITLES[self.name]} {how}; see {self.log_path}"


_TITLES: dict[Component, str] = {
    "azurite": "Azurite",
    "emulator": "the Service Bus emulator",
    "issuer": "the token issuer",
    "host": "the Functions host",
}


@dataclass
class LocalStack:
    """A running local stack. Stop it with ``stop()`` or by leaving its ``with`` block."""

    work_dir: Path
    azurite: Azurite
    emulator: ChildProcess
    host: ChildProcess
    issuer: ChildProcess
    minter: TokenMinter
    owns_work_dir: bool = False
    # Components killed or stopped on purpose through this object, until started again.
    taken_down: set[Component] = field(default_factory=set)
    # How many processes run the Function App (local.functions_host.instances); ``host`` is their
    # supervisor when more than one.
    host_instances: int = 1

    def host_pids(self) -> list[int]:
        """The processes running the Function App: the host itself, or each of its instances."""
        if self.host.process is None:
            return []
        if self.host_instances == 1:
            return [self.host.process.pid]
        import psutil  # a dev dependency, as the callers (tests, bench) are

        from local.functions_host.instances import INSTANCE_INDEX_ENV

        children = psutil.Process(self.host.process.pid).children()
        return [
            child.pid
            for child in sorted(children, key=lambda child: int(child.environ()[INSTANCE_INDEX_ENV]))
        ]

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.host.port}/api"

    def token(self, identity: str = "local-producer", *, roles: tuple[str, ...] | None = None) -> str:
        """A signed access token for one of local.identity's identities (its own roles by default)."""
        return self.minter.token(identity_named(identity), roles=roles)

    def auth_headers(self, identity: str = "local-producer") -> dict[str, str]:
        """``Authorization: Bearer <token>`` for ``identity``: what every call to the API carries."""
        return {"Authorization": f"Bearer {self.token(identity)}"}

    @property
    def servicebus_connection_string(self) -> str:
        return connection_string(self.emulator.port, DEFAULT_KEY, host="127.0.0.1")

    @property
    def servicebus_management_connection_string(self) -> str:
        """For the administration client (``claimcheck-ops stats``): the emulator's management port."""
        (management_port,) = self.emulator.other_ports
        return connection_string(management_port, DEFAULT_KEY, host="127.0.0.1")

    @property
    def storage_connection_string(self) -> str:
        return self.azurite.connection_string

    def exited(self) -> list[ExitedComponent]:
        """Components whose process has exited on its own (not through ``kill()`` or ``stop()``)."""
        codes: list[tuple[Component, int | None, Path]] = [
            ("azurite", self.azurite.process.poll(), self.azurite.log_path),
            ("emulator", self.emulator.exit_code(), self.emulator.log_path),
            ("issuer", self.issuer.exit_code(), self.issuer.log_path),
            ("host", self.host.exit_code(), self.host.log_path),
        ]
        return [
            ExitedComponent(name, code, log)
            for name, code, log in codes
            if code is not None and name not in self.taken_down
        ]

    def kill(self, component: Component) -> None:
        """SIGKILL one component at once (a crash, as the others see it); its data stays."""
        self.taken_down.add(component)
        if component == "azurite":
            self.azurite.kill()
        else:
            self._child(component).kill()

    def start(self, component: Component) -> None:
        """Start a killed or stopped component again on the same port(s) with the same data.

        Call it from a thread that lives as long as the component (e.g. the main thread): a child is
        sent a stop signal when the thread that started it ends (``die_with_parent``)."""
        if component == "azurite":
            if self.azurite.process.poll() is None:
                raise RuntimeError("Azurite is running: kill or restart it instead")
            self.azurite = start_azurite(self.azurite.data_dir, ports=self.azurite.ports)
        else:
            self._child(component).start()
        self.taken_down.discard(component)

    def restart(self, component: Component) -> None:
        """Stop one component cleanly (Azurite flushes its data), then start it again where it was."""
        self.taken_down.add(component)
        if component == "azurite":
            self.azurite.stop(flush=True)
        else:
            self._child(component).stop()
        self.start(component)

    def restart_emulator(self) -> None:
        """Stop the emulator and start it again on the same port with the same data folder."""
        self.restart("emulator")

    def _child(self, component: Literal["emulator", "issuer", "host"]) -> ChildProcess:
        return {"emulator": self.emulator, "issuer": self.issuer, "host": self.host}[component]

    def stop(self) -> None:
        """Stop the host first (it settles in-flight work), then the emulator, then Azurite. A Ctrl-C
        meanwhile is ignored: stopping half of the stack would leave the rest running."""
        with uninterruptible():
            try:
                self.host.stop()
                self.emulator.stop()
                self.issuer.stop()
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
    issuer_port: int | None = None,
    app_path: Path = FUNCTION_APP,
    app_settings: Mapping[str, str] | None = None,
    host_instances: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> LocalStack:
    """Start Azurite, the emulator and the Functions host; wait until each is ready.

    ``work_dir`` keeps the emulator data, Config.json, local.settings.json and the logs (a throwaway
    folder when omitted). Ports default to free ones. ``app_settings`` are added to the host's
    local.settings.json values (e.g. a smaller inline threshold for a test). ``host_instances`` runs
    the Function App as that many host processes sharing the port (default: the environment's
    ``LOCAL_FUNCTIONS_HOST_INSTANCES``, else 2; an out-of-range value raises ``InstanceCountRefused``
    naming it). ``progress`` is told what starts and, once it answers, how long it took (the launcher
    and the demo print these lines).
    """
    report = progress or (lambda _: None)
    instances = (
        configured_instance_count()
        if host_instances is None
        else parse_instance_count(str(host_instances), source="host_instances")
    )
    # Refuse a taken port before anything starts (ChildProcess.start checks again, against races).
    if emulator_port:
        ensure_port_free(emulator_port, "Service Bus emulator")
    # Microsoft's layout (management 5300 beside AMQP 5672), else a free one; named here so that the
    # launcher can check it and print its connection string.
    management_port = default_management_port(emulator_port or 0) or free_port()
    ensure_port_free(management_port, "Service Bus emulator management")
    if host_port:
        ensure_port_free(host_port, "functions host")
    if issuer_port:
        ensure_port_free(issuer_port, "token issuer")
    owns = work_dir is None
    folder = Path(tempfile.mkdtemp(prefix="claimcheck-stack-")) if work_dir is None else work_dir
    folder.mkdir(parents=True, exist_ok=True)
    config_path = write_emulator_config(topology or load_topology(), folder / "Config.json", clamp=False)
    with _timed(report, "Azurite"):
        azurite = start_azurite(folder / "azurite")
    emulator = host = issuer = None
    try:
        raise_if_interrupted()  # a Ctrl-C while Azurite was forked
        issuer, minter = _issuer_process(folder, issuer_port or free_port())
        with _timed(report, "the token issuer"):
            issuer.start()
        emulator = _emulator_process(folder, config_path, emulator_port or free_port(), management_port)
        with _timed(report, "the Service Bus emulator"):
            emulator.start()
        bus_connection = connection_string(emulator.port, DEFAULT_KEY, host="127.0.0.1")
        # The app's settings from the one table (claimcheck.settings.SETTINGS) as the topology gives them,
        # exactly as infra/ writes them on Azure: entity names (the trigger binds its queue through one),
        # the queue's delivery limit, the provisional tag, evidence in its own container (no lock:
        # Azurite has no immutability policies).
        identity_settings = {
            **topology_settings(topology or load_topology(), "local").to_env(),
            ISSUER_SETTING: minter.issuer,
            AUDIENCE_SETTING: minter.audience,
            JWKS_URI_SETTING: jwks_url(minter.base_url, minter.directory_tenant),
            ACCESS_TABLE_SETTING: local_access_table().to_json(),
            **local_consumer_settings(),
        }
        values = {**identity_settings, **(app_settings or {})}
        # The Functions host's request limit, always derived from the (possibly overridden) inline cap, as
        # infra/ writes it: one source of truth, so it is not an app setting a caller passes.
        cap = Settings.from_env(values).max_inline_request_bytes
        values[HOST_REQUEST_LIMIT_SETTING] = str(host_request_body_limit(cap))
        settings_path = _write_local_settings(folder, azurite.connection_string, bus_connection, values)
        # The deploy side's job, as infra/ does on Azure: the app expects its container and tables.
        local_values = json.loads(settings_path.read_text(encoding="utf-8"))["Values"]
        configured = Settings.from_env(local_values)
        provision_storage(configured, azurite.connection_string)
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
                # The host's request-body limit: the app setting FUNCTIONS_REQUEST_BODY_SIZE_LIMIT, which
                # Azure's host reads and the stack derived from intake's inline cap as infra/ does (the cap
                # plus the multipart margin). The host reads no body above it (a larger Content-Length
                # reaches the app unread, which answers 413 use_direct_upload; a chunked one gets the
                # host's own 413), so its memory is bounded.
                "--max-body-bytes",
                local_values[HOST_REQUEST_LIMIT_SETTING],
                "--instances",
                str(instances),
            ],
            port=port,
            log_path=folder / "functions-host.log",
            # Printed once every instance serves (the port answers as soon as the first does).
            ready_text="Functions host ready on ",
        )
        with _timed(report, f"the Functions host ({instances} instance{'s' * (instances != 1)})"):
            host.start()
    except BaseException:
        with uninterruptible():
            for started in (host, emulator, issuer):
                if started is not None:
                    started.stop()
            azurite.stop(flush=not owns)
            if owns:
                shutil.rmtree(folder, ignore_errors=True)
        raise
    return LocalStack(folder, azurite, emulator, host, issuer, minter, owns, host_instances=instances)


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """Ctrl-C (SIGINT) ignored for the block, in the main thread (the only one that gets signals):
    for stopping, which must not stop halfway. Elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _timed(report: Callable[[str], None], what: str) -> Iterator[None]:
    started = time.monotonic()
    report(f"  starting {what}...")
    yield
    report(f"  {what} ready in {time.monotonic() - started:.1f} s")


def _issuer_process(folder: Path, port: int) -> tuple[ChildProcess, TokenMinter]:
    """The local token issuer; its key is made here (kept in ``folder``) so that ``token()`` can sign too."""
    key_path = folder / "identity-signing-key.pem"
    key = SigningKey.load(key_path) if key_path.exists() else SigningKey.generate()
    if not key_path.exists():
        key.save(key_path)
    process = ChildProcess(
        name="token issuer",
        command=[sys.executable, "-m", "local.identity", "--key", str(key_path), "--port", str(port)],
        port=port,
        log_path=folder / "identity.log",
    )
    return process, TokenMinter(key, base_url=f"http://127.0.0.1:{port}")


def _emulator_process(folder: Path, config_path: Path, port: int, management_port: int) -> ChildProcess:
    data = folder / "servicebus"
    data.mkdir(exist_ok=True)
    return ChildProcess(
        name="Service Bus emulator",
        command=[
            sys.executable,
            "-m",
            "servicebus_emulator",
            "--config",
            str(config_path),
            "--port",
            str(port),
            "--management-port",
            str(management_port),
            "--data",
            str(data),
        ],
        port=port,
        other_ports=(management_port,),
        log_path=folder / "servicebus.log",
    )


def _write_local_settings(folder: Path, storage: str, servicebus: str, extra: Mapping[str, str]) -> Path:
    """local.settings.json for the host: the names the app binds to, as Core Tools would read them."""
    values = {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "AzureWebJobsStorage": storage,
        SERVICEBUS_CONNECTION: servicebus,
        STORAGE_CONNECTION: storage,
        **telemetry_settings(folder),
        **extra,
    }
    path = folder / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": values}, indent=2), encoding="utf-8")
    return path


def telemetry_settings(folder: Path) -> dict[str, str]:
    """Spans and metrics as OTLP JSON lines under ``<folder>/telemetry``
    (claimcheck.adapters.telemetry_setup), written within about a second of the work (spans) or every
    two seconds (metrics)."""
    return {
        TELEMETRY_DIR_SETTING: str(folder / TELEMETRY_DIR),
        "OTEL_BSP_SCHEDULE_DELAY": "500",
        "OTEL_METRIC_EXPORT_INTERVAL": "2000",
    }


USER_HELP = """\
Run the whole claim-check stack on this machine: Azurite (Blob and Table
storage), the Service Bus emulator, the local token issuer (Entra ID's
stand-in) and the Functions host serving the API.

It prints each component as it starts, then the endpoints (API URL, Service
Bus connection strings, token issuer, data folder), and serves until Ctrl-C,
which stops everything it started. Data (queues, dead letters, stored
documents, logs, telemetry) is kept in --data between runs; `make reset` (or
deleting the folder) starts afresh. Use `claimcheck-ops` from another terminal
to operate it.
"""
# 128 + SIGINT: the exit code a shell gives a program a Ctrl-C ended.
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    # Imported here, not beside the other local.* imports: the launcher's own concern.
    from local.running import DEFAULT_DATA_DIR, remove_running_file

    parser = argparse.ArgumentParser(
        prog="python -m local.stack",
        description=USER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--port",
        type=int,
        default=7071,
        help="Functions host HTTP port (default: %(default)s; 0 = a free one)",
    )
    parser.add_argument(
        "--servicebus-port",
        type=int,
        default=5672,
        help="emulator AMQP port (default: %(default)s; 0 = a free one)",
    )
    parser.add_argument(
        "--issuer-port",
        type=int,
        default=7090,
        help="local token issuer HTTP port (default: %(default)s; 0 = a free one)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where data, settings and logs go (default: %(default)s)",
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="delete the data folder (queues, dead letters, stored documents, logs) and exit; "
        "refused while a stack runs from it (`make reset`)",
    )
    args = parser.parse_args(argv)
    if args.reset:
        return reset(args.data)
    signal.signal(signal.SIGINT, interrupt_handler)
    print("Starting the local stack:", flush=True)
    starting = time.monotonic()
    try:
        stack = start_stack(
            work_dir=args.data,
            host_port=args.port,
            emulator_port=args.servicebus_port,
            issuer_port=args.issuer_port,
            progress=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt:  # start_stack stopped what it had started
        print("interrupted; stack stopped", file=sys.stderr, flush=True)
        return INTERRUPTED
    except PortInUse as exc:
        flags = {
            "Service Bus emulator": "--servicebus-port",
            "functions host": "--port",
            "token issuer": "--issuer-port",
        }
        flag = flags.get(exc.what)
        if exc.what == "Service Bus emulator management":
            flag = "--servicebus-port (any port but 5672 gets a free management port)"
        hint = f"; stop it, or choose another port with {flag}" if flag else ""
        print(f"error: {exc}{hint}", file=sys.stderr, flush=True)
        return 1
    except (RuntimeError, AzuriteNotInstalled, TimeoutError, InstanceCountRefused) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    stop_requested = threading.Event()
    interrupts: list[int] = []

    def request_stop(signal_number: int, _: object) -> None:
        interrupts.append(signal_number)
        stop_requested.set()

    exited: list[ExitedComponent] = []
    try:
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signal_number, request_stop)
        raise_if_interrupted()
        running_file(stack).write(args.data)
        print(f"Local stack up in {time.monotonic() - starting:.1f} s.", flush=True)
        _print_endpoints(stack)
        while not stop_requested.wait(_SUPERVISE_SECONDS):
            exited = stack.exited()
            if exited:
                for component in exited:
                    print(f"error: {component}", file=sys.stderr, flush=True)
                break
    except KeyboardInterrupt:  # before the handler was in place
        interrupts.append(signal.SIGINT)
    finally:
        print("Stopping the local stack...", flush=True)
        stopping = time.monotonic()
        stack.stop()
        remove_running_file(args.data)
        took = f"in {time.monotonic() - stopping:.1f} s"
        if signal.SIGINT in interrupts:
            print(f"interrupted; stack stopped {took}", file=sys.stderr, flush=True)
        else:
            print(f"Stopped {took}.", flush=True)
    if signal.SIGINT in interrupts:
        return INTERRUPTED
    return 1 if exited else 0


if TYPE_CHECKING:  # the launcher's running.json; imported where used, as main() does
    from local.running import RunningStack


def running_file(stack: LocalStack) -> RunningStack:
    """What `claimcheck-ops` reads to reach this stack by itself (local/running.py)."""
    from local.running import RunningStack

    return RunningStack(
        pid=os.getpid(),
        api=stack.api_url,
        token_issuer=stack.minter.issuer,
        servicebus=stack.servicebus_connection_string,
        servicebus_management=stack.servicebus_management_connection_string,
        storage=stack.storage_connection_string,
        telemetry_dir=str(stack.work_dir / TELEMETRY_DIR),
    )


def reset(data: Path) -> int:
    """Delete a stopped stack's data folder: the next start has empty queues, storage and logs."""
    from local.running import StaleStack, read_running_stack

    try:
        running = read_running_stack(data)
    except StaleStack:
        running = None  # left by a killed launcher: nothing runs from the folder
    if running is not None:
        print(
            f"error: a local stack runs from {data} (process {running.pid}): stop it first (Ctrl-C)",
            file=sys.stderr,
        )
        return 1
    if not data.exists():
        print(f"Nothing to reset: {data} does not exist.")
        return 0
    # Only a folder the stack made (it always writes Config.json first): a mistyped --data is kept.
    if not (data / "Config.json").exists():
        print(
            f"error: {data} is not a local stack's data folder (no Config.json); not deleted", file=sys.stderr
        )
        return 1
    shutil.rmtree(data)
    print(f"Removed {data}: the next start begins with empty queues, storage and logs.")
    return 0


def _print_endpoints(stack: LocalStack) -> None:
    """What a user needs to reach the stack; docs/local-stack.md shows these lines as printed."""
    data = stack.work_dir
    print(f"Functions API      {stack.api_url}  (POST /documents, GET /work-items/{{id}}, GET /openapi.json)")
    print(f"  (host instances) {stack.host_instances}  (LOCAL_FUNCTIONS_HOST_INSTANCES)")
    print(f"Service Bus        {stack.servicebus_connection_string}")
    print(f"  (management)     {stack.servicebus_management_connection_string}")
    print(f"Blob storage       {stack.azurite.blob_endpoint}")
    print(f"Table storage      {stack.azurite.table_endpoint}")
    print(f"Token issuer       {stack.minter.issuer}  (audience {stack.minter.audience})")
    print(f"Storage conn.      PayloadStorage in {data / 'local.settings.json'}")
    print(f"Logs and data      {data}")
    print(f"Traces, metrics    {data / TELEMETRY_DIR}  (claimcheck-ops trace <work item>)")
    print("Operate it         .venv/bin/claimcheck-ops --help  (it finds this stack by itself)")
    print("Start afresh       make reset, once stopped  (deletes the data above)")
    print("Press Ctrl-C to stop.", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
