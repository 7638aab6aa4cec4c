"""``servicebus-emulator --config Config.json [--port 5672] [--data DIR | --in-memory]``

Prints the connection string, then serves until SIGINT/SIGTERM. A bad config is refused before
anything listens, with the offending entry named.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from servicebus_emulator.broker import Broker
from servicebus_emulator.cbs import SharedAccessKey
from servicebus_emulator.config import ConfigError, parse_config
from servicebus_emulator.connection import OutputGroup
from servicebus_emulator.server import (
    DEFAULT_KEY,
    certificate_directory,
    connection_string,
    default_management_port,
    namespace_message_size,
    new_loop,
    serve,
)
from servicebus_emulator.store import Store
from servicebus_emulator.tls import Certificate, generate_certificate


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="servicebus-emulator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, required=True, help="Config.json (Microsoft emulator schema)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5672, help="AMQP port (default 5672)")
    parser.add_argument(
        "--management-port",
        type=int,
        default=None,
        help="management (ATOM) port, HTTPS and plain HTTP: default 5300 beside AMQP 5672 as in "
        "Microsoft's emulator, else a free port; both connection strings are printed",
    )
    parser.add_argument(
        "--certificate-dir",
        type=Path,
        default=None,
        help="where the management plane's self-signed certificate is written at start (default: "
        "DATA/tls with --data, else a temporary directory removed at exit); its path is printed",
    )
    storage = parser.add_mutually_exclusive_group(required=True)
    storage.add_argument("--data", type=Path, help="directory for the SQLite store (survives restarts)")
    storage.add_argument("--in-memory", action="store_true", help="keep nothing on disk")
    parser.add_argument("--key-name", default=DEFAULT_KEY.name, help="SharedAccessKeyName clients must use")
    parser.add_argument("--key", default=DEFAULT_KEY.key, help="SharedAccessKey clients must sign with")
    parser.add_argument("--no-auth", action="store_true", help="accept any token (no signature check)")
    parser.add_argument(
        "--premium",
        action="store_true",
        help="a Premium namespace: 1 MB messages, and entities may set their own limit up to 100 MB",
    )
    parser.add_argument(
        "--max-message-size", type=int, default=None, help="bytes (default 256 KiB; 1 MiB with --premium)"
    )
    parser.add_argument("--max-messages-per-entity", type=int, default=None, help="quota (default: none)")
    return parser.parse_args(argv)


async def _run(
    broker: Broker,
    key: SharedAccessKey | None,
    host: str,
    ports: tuple[int, int],
    shown: Callable[[int], str],
    output: OutputGroup,
    certificate: Certificate,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    def announce(amqp: int, management: int) -> None:  # the bound ports (--port 0 picks one)
        print(shown(amqp), flush=True)
        print(shown(management) + "  (management)", flush=True)
        print(f"Management TLS certificate: {certificate.certificate_path}", flush=True)

    await serve(broker, key, host, ports[0], stop, announce, ports[1], output, certificate)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        namespace = parse_config(args.config)
    except ConfigError as exc:
        print(f"servicebus emulator: refusing to start: {exc}", file=sys.stderr)
        return 2
    key = None if args.no_auth else SharedAccessKey(args.key_name, args.key)
    store = Store(None if args.in_memory else args.data)
    broker = Broker(
        namespace,
        store,
        max_message_size=namespace_message_size(args.premium, args.max_message_size),
        premium=args.premium,
        max_messages_per_entity=args.max_messages_per_entity,
    )

    # The development key is public and printed whole, so the line can be pasted as is; a key of the
    # user's own is a secret and never reaches stdout (often a log file).
    def banner(port: int) -> str:
        shown = connection_string(port, key)
        if key is not None and key != DEFAULT_KEY:
            shown = shown.replace(f"SharedAccessKey={key.key};", "SharedAccessKey=<the --key value>;")
        return shown

    management_port = (
        default_management_port(args.port) if args.management_port is None else args.management_port
    )
    directory = args.certificate_dir or certificate_directory(args.data)
    certificate = generate_certificate(directory, args.host)
    loop, output = new_loop(broker)
    try:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            runner.run(
                _run(broker, key, args.host, (args.port, management_port), banner, output, certificate)
            )
    finally:
        store.close()
        if args.certificate_dir is None and args.data is None:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
