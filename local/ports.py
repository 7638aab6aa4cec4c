"""Loopback port helpers shared by every local service launcher."""

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


class PortInUse(RuntimeError):
    """A port a component must listen on is already taken (by another stack or program)."""

    def __init__(self, port: int, what: str, host: str = "127.0.0.1") -> None:
        super().__init__(
            f"port {port} ({what}) is already in use on {host}: another local stack or program holds it"
        )
        self.port = port
        self.what = what


def ensure_port_free(port: int, what: str, *, host: str = "127.0.0.1") -> None:
    """Raise ``PortInUse`` naming ``port`` and ``what`` if something already listens on ``host:port``.

    The probe binds with SO_REUSEADDR like our servers (Python's and Node's) do, so a socket of a
    component that has just exited (TIME_WAIT) does not count as taken, while a live listener does."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUse(port, what, host) from None
