"""``python -m local.functions_host --app functions/function_app.py --port 7071``: serve until stopped.

``--instances N`` (default: the environment variable LOCAL_FUNCTIONS_HOST_INSTANCES, else 2) runs the app
as N host processes sharing the port, as a scaled-out Function App (instances.py)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from local.functions_host.host import DEFAULT_APP, start_host
from local.functions_host.http_server import DEFAULT_MAX_BODY_BYTES
from local.functions_host.instances import (
    INSTANCES_SETTING,
    InstanceCountRefused,
    Supervisor,
    configured_instance_count,
    exit_like,
    instance_index,
    parse_instance_count,
    report_ready,
    reserve_port,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.functions_host", description=__doc__)
    parser.add_argument(
        "--app", type=Path, default=DEFAULT_APP, help="function app script (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=7071, help="HTTP port (default: %(default)s; 0 = any free port)"
    )
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--settings",
        type=Path,
        default=None,
        help="local.settings.json to apply (default: the one next to the app)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest accepted HTTP request body (default: %(default)s)",
    )
    parser.add_argument("--functions", nargs="+", default=None, help="run only these functions")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--instances",
        default=None,
        help=f"host instances sharing the port (default: ${INSTANCES_SETTING}, else 2)",
    )
    args = parser.parse_args(argv)
    try:
        count = (
            configured_instance_count()
            if args.instances is None
            else parse_instance_count(args.instances, source="--instances")
        )
    except InstanceCountRefused as refused:
        parser.error(str(refused))
    index = instance_index()
    tag = "" if index is None else f"[instance {index}] "
    logging.basicConfig(level=args.log_level, format=f"%(asctime)s %(levelname)s {tag}%(name)s: %(message)s")
    # The AMQP stack logs every frame at INFO; keep the host log about our functions.
    logging.getLogger("azure").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    # So does uamqp's C core, through the binding extension's decoder: eight INFO lines per message.
    logging.getLogger("uamqp").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))

    if index is None and count > 1:
        return _supervise(args, count)
    stop_requested = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop_requested.set())
    with start_host(
        args.app,
        port=args.port,
        bind=args.bind,
        local_settings=args.settings,
        max_body_bytes=args.max_body_bytes,
        only=args.functions,
        instance=index or 0,
        reuse_port=index is not None,
    ) as host:
        names = ", ".join(function.name for function in host.app.functions)
        if index is None:
            print(f"Functions host ready on {host.base_url} with: {names}", flush=True)
        else:
            logging.getLogger(__name__).info("serving %s on %s", names, host.base_url)
            report_ready()
        stop_requested.wait()
        if index is None:
            print("Functions host stopping", flush=True)
    return 0


def _supervise(args: argparse.Namespace, count: int) -> int:
    """Run ``count`` instances on one port (a free one reserved here for ``--port 0``) until stopped."""
    reservation = reserve_port(args.bind) if args.port == 0 else None
    port = args.port if reservation is None else reservation.getsockname()[1]
    instance_args = [
        *("--app", str(args.app), "--port", str(port), "--bind", args.bind),
        *("--max-body-bytes", str(args.max_body_bytes), "--log-level", args.log_level),
        *(("--settings", str(args.settings)) if args.settings else ()),
        *(("--functions", *args.functions) if args.functions else ()),
    ]
    supervisor = Supervisor(count, instance_args)
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: supervisor.stop_requested.set())
    try:
        supervisor.start()
    except RuntimeError as failed:
        print(f"Functions host failed to start: {failed}", flush=True)
        return 1
    pids = ", ".join(str(child.pid) for child in supervisor.children)
    print(
        f"Functions host ready on http://{args.bind}:{port} with {count} instances (pids {pids})", flush=True
    )
    code = supervisor.serve()
    if code == 0:
        print("Functions host stopped", flush=True)
    return exit_like(code)


if __name__ == "__main__":
    raise SystemExit(main())
