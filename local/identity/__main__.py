"""``python -m local.identity --key signing-key.pem --port 0``: serve the local token issuer until stopped."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from local.identity.keys import SigningKey, TokenMinter
from local.identity.server import make_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.identity", description=__doc__)
    parser.add_argument("--key", type=Path, required=True, help="PEM RSA private key (created if absent)")
    parser.add_argument(
        "--port", type=int, default=7090, help="HTTP port on 127.0.0.1 (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.key.exists():
        key = SigningKey.load(args.key)
    else:
        key = SigningKey.generate()
        key.save(args.key)
    server = make_server(TokenMinter(key, base_url=f"http://127.0.0.1:{args.port}"), args.port)
    stop = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="issuer", daemon=True)
    thread.start()
    logging.getLogger("local.identity").info("issuer ready on http://127.0.0.1:%d", server.server_address[1])
    stop.wait()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
