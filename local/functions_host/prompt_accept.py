"""Accept a session without the SDK's 50 ms naps between the frames of the handshake.

The sync ``ServiceBusReceiver._open`` (azure-servicebus 7.15) loops ``while not client_ready():
time.sleep(0.05)``, and each ``client_ready()`` handles at most one incoming frame. Opening a session
receiver takes nine such turns (SASL, open, begin, the CBS links and token, the receiving link's
attach), so every accepted session cost ~465 ms of which ~450 ms asleep — measured against our
emulator with one thread and nothing else running; with the nap it is ~15 ms. The Functions host
(.NET) pays nothing like it, and the local host accepts one session per document.

``client_ready()`` already blocks on the socket (up to its 0.2 s read timeout) while no frame has
arrived, so the loop does not spin without the nap: an idle accept makes the same dozen turns in its
``max_wait_time`` as before. Inside ``prompt_accept()`` the nap becomes ``time.sleep(0)`` (it still
lets other threads run); every other thread, the function app's own receivers included, keeps the
SDK's behaviour. If an SDK upgrade stops using ``time.sleep`` there, this does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import azure.servicebus._servicebus_receiver as receiver_module

_accepting = threading.local()
_install_lock = threading.Lock()


class _ReceiverModuleTime:
    """``time`` as the SDK's receiver module sees it: the real module, but ``sleep`` does not nap on a
    thread inside ``prompt_accept()``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(0 if getattr(_accepting, "active", False) else seconds)


def install() -> None:
    """Give the SDK's receiver module the time shim (once per process; idempotent)."""
    with _install_lock:
        if not isinstance(getattr(receiver_module, "time", None), _ReceiverModuleTime):
            setattr(receiver_module, "time", _ReceiverModuleTime())  # noqa: B010 - mypy: a module attribute


@contextmanager
def prompt_accept() -> Iterator[None]:
    """Open a receiver (``receiver.__enter__()``) inside this block to skip the SDK's naps."""
    install()
    _accepting.active = True
    try:
        yield
    finally:
        _accepting.active = False
