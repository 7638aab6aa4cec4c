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

The same turn is where a waiting accept can be called off: given a ``cancel`` event that is set, the
nap raises ``AcceptCancelled`` (the SDK closes the half-open receiver and passes the error on), so a
stopping listener's workers leave an accept within one read timeout instead of its whole wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import azure.servicebus._servicebus_receiver as receiver_module
from azure.servicebus.exceptions import ServiceBusError

_accepting = threading.local()
_install_lock = threading.Lock()


class AcceptCancelled(ServiceBusError):
    """The accept was called off (its listener is stopping) while it waited for a session. A
    ServiceBusError, so that the SDK closes the half-open receiver quietly (it logs any other
    exception type there as unexpected, with its traceback) and does not retry it."""

    def __init__(self) -> None:
        super().__init__("the listener is stopping", retryable=False, shutdown_handler=True)


class _ReceiverModuleTime:
    """``time`` as the SDK's receiver module sees it: the real module, but ``sleep`` does not nap on a
    thread inside ``prompt_accept()``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        if not getattr(_accepting, "active", False):
            time.sleep(seconds)
            return
        cancel: threading.Event | None = getattr(_accepting, "cancel", None)
        if cancel is not None and cancel.is_set():
            raise AcceptCancelled
        time.sleep(0)


def install() -> None:
    """Give the SDK's receiver module the time shim (once per process; idempotent)."""
    with _install_lock:
        if not isinstance(getattr(receiver_module, "time", None), _ReceiverModuleTime):
            setattr(receiver_module, "time", _ReceiverModuleTime())  # noqa: B010 - mypy: a module attribute


@contextmanager
def prompt_accept(cancel: threading.Event | None = None) -> Iterator[None]:
    """Open a receiver (``receiver.__enter__()``) inside this block to skip the SDK's naps; once
    ``cancel`` is set, the open raises (``AcceptCancelled``, possibly wrapped by the SDK)."""
    install()
    _accepting.active = True
    _accepting.cancel = cancel
    try:
        yield
    finally:
        _accepting.active = False
        _accepting.cancel = None
