"""``python -m local.functions_host --app functions/function_app.py --port 7071``: serve until stopped."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from local.functions_host.host import DEFAULT_APP, start_host
from local.functions_host.http_server import DEFAULT_MAX_BODY_BYTES


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
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The AMQP stack logs every frame at INFO; keep the host log about our functions.
    logging.getLogger("azure").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    # So does uamqp's C core, through the binding extension's decoder: eight INFO lines per message.
    logging.getLogger("uamqp").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))

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
    ) as host:
        names = ", ".join(function.name for function in host.app.functions)
        print(f"Functions host ready on {host.base_url} with: {names}", flush=True)
        stop_requested.wait()
        print("Functions host stopping", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
