"""Loopback port helpers shared by every local service launcher."""

from __future__ import annotations

import socket

# The Service Bus emulator is a distribution of its own (emulators/servicebus) and cannot import
# `local`; the two helpers live there and every local launcher uses them from here.
from servicebus_emulator.net import free_port, wait_for_port

__all__ = ["PortInUse", "ensure_port_free", "free_port", "wait_for_port"]


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
