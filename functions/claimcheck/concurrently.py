"""Independent storage requests sent at once: the hot path waits one round trip for both, not two.

``both(first, second)`` runs ``second`` on a small shared thread pool while the calling thread runs
``first``, and returns only when both have finished (nothing keeps running behind the caller's back,
so a crash or an error still leaves the same states as the two calls made in sequence). The pool's
own threads run a nested ``both`` sequentially, so a full pool can never deadlock on itself.
The caller's context variables (e.g. the current OpenTelemetry span) go with ``second``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

# Each consumer or intake thread has at most one request in the pool at a time; the pool only bounds
# how many wait on the network together (the Functions host runs a few dozen invocations at most).
_POOL_THREADS = 32
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_in_pool = threading.local()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=_POOL_THREADS, thread_name_prefix="claimcheck-io", initializer=_mark_pool_thread
            )
        return _pool


def _mark_pool_thread() -> None:
    _in_pool.active = True


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``(first(), second())`` with the two running at once; the first exception raised wins."""
    if getattr(_in_pool, "active", False):
        return first(), second()
    future = _executor().submit(contextvars.copy_context().run, second)
    try:
        result = first()
    except BaseException:
        wait([future])  # let the other finish (its outcome is superseded by this error)
        raise
    return result, future.result()
