"""Loopback port helpers: a free port to listen on, and waiting until something listens."""

from __future__ import annotations

import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, *, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
    """Block until something accepts TCP connections on ``host:port``, or raise ``TimeoutError``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f} s") from None
            time.sleep(0.05)
