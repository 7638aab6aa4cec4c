"""Start and stop the local Functions host: HTTP server, Service Bus listeners and timers together."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from local.functions_host.app_loader import (
    FunctionApp,
    HttpFunction,
    ServiceBusFunction,
    TimerFunction,
    load_function_app,
)
from local.functions_host.host_config import (
    HostOptions,
    HttpOptions,
    ServiceBusOptions,
    apply_local_settings,
    read_host_json,
)
from local.functions_host.http_server import DEFAULT_MAX_BODY_BYTES, FunctionsHttpServer, RouteTable
from local.functions_host.listener_lock import ListenerLock, host_id
from local.functions_host.servicebus_listener import ServiceBusListener
from local.functions_host.timer_runner import TimerRunner

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_APP = REPO_ROOT / "functions" / "function_app.py"
# The host's own storage (locks, as on Azure), from the app settings.
_HOST_STORAGE_SETTING = "AzureWebJobsStorage"


@dataclass
class RunningHost:
    """A started host; ``stop()`` (or leaving the ``with`` block) stops every trigger."""

    app: FunctionApp
    options: HostOptions
    http: FunctionsHttpServer
    listeners: list[ServiceBusListener] = field(default_factory=list)
    timers: list[TimerRunner] = field(default_factory=list)
    http_thread: threading.Thread | None = None
    stopped: bool = False

    @property
    def port(self) -> int:
        return int(self.http.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/<routePrefix>`` — where the HTTP functions live."""
        prefix = f"/{self.options.route_prefix}" if self.options.route_prefix else ""
        return f"http://{self.http.server_address[0]!s}:{self.port}{prefix}"

    def stop(self) -> None:
        """Stop taking work, let in-flight invocations finish (bounded), close every connection."""
        if self.stopped:
            return
        self.stopped = True
        if self.http_thread is not None:
            self.http.shutdown()
        for timer in self.timers:
            timer.stop()
        for listener in self.listeners:
            listener.stop()
        self.http.server_close()

    def __enter__(self) -> RunningHost:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_host(
    app_path: Path = DEFAULT_APP,
    *,
    port: int = 7071,
    bind: str = "127.0.0.1",
    local_settings: Path | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    only: Collection[str] | None = None,
    http_limits: HttpOptions | None = None,
    service_bus: ServiceBusOptions | None = None,
    instance: int = 0,
    reuse_port: bool = False,
) -> RunningHost:
    """Load the app next to its host.json and local.settings.json and start all its triggers.

    ``port=0`` picks a free port (see ``RunningHost.port``). The settings file defaults to the app
    folder's local.settings.json; its "Values" are applied before the app is imported, as Core Tools does.
    ``only`` runs just the named functions, like ``func start --functions``. ``http_limits`` replaces
    host.json's ``extensions.http`` throttles (tests use small ones); ``service_bus`` likewise replaces its
    ``extensions.serviceBus`` options. ``instance`` (this process's index among the app's instances) and
    ``reuse_port`` (share the port with the other instances) are set by the instances' supervisor.
    Timers take the function's listener lock in ``AzureWebJobsStorage`` when that setting is present
    (without it, as with a single instance and no storage, they simply run).
    """
    folder = app_path.resolve().parent
    apply_local_settings(local_settings or folder / "local.settings.json")
    app = load_function_app(app_path, only=only)
    options = read_host_json(folder / "host.json")
    http = FunctionsHttpServer(
        (bind, port),
        RouteTable(app.of_type(HttpFunction), options.route_prefix),
        max_body_bytes,
        http_limits or options.http,
        reuse_port=reuse_port,
    )
    running = RunningHost(app=app, options=options, http=http)
    try:
        for bus_function in app.of_type(ServiceBusFunction):
            # The host resolves `%NAME%` entity names from the app settings applied above.
            listener = ServiceBusListener(
                bus_function.resolved(os.environ), service_bus or options.service_bus
            )
            running.listeners.append(listener)
            listener.start()
        for timer_function in app.of_type(TimerFunction):
            storage = os.environ.get(_HOST_STORAGE_SETTING)
            lock = (
                ListenerLock(storage, host_id(app.path), timer_function.name, instance) if storage else None
            )
            timer = TimerRunner(timer_function, lock)
            running.timers.append(timer)
            timer.start()
        running.http_thread = http.serve_in_thread()
    except BaseException:
        running.stop()
        raise
    logger.info(
        "functions host: %d function(s) from %s on %s", len(app.functions), app.path, running.base_url
    )
    return running
