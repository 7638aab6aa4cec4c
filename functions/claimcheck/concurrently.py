"""Independent storage requests sent at once: the hot path waits one round trip for both, not two.

``read_ahead(chunks)`` does the same for a transfer: the next chunk is fetched while the caller
verifies and stores the current one (at most two chunks in memory).

``both(first, second)`` runs ``second`` on a small shared thread pool while the calling thread runs
``first``, and returns only when both have finished (nothing keeps running behind the caller's back,
so a crash or an error still leaves the same states as the two calls made in sequence). The pool's
own threads run a nested ``both`` sequentially, so a full pool can never deadlock on itself.
The caller's context variables (e.g. the current OpenTelemetry span) go with ``second``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar, cast

A = TypeVar("A")
B = TypeVar("B")
T = TypeVar("T")
_END = object()

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


def read_ahead(items: Iterable[T]) -> Generator[T, None, None]:
    """The items of ``items`` in order, each next one fetched on the pool while the caller works on
    the current one. Leaving the loop early waits for the fetch in flight (nothing runs on after)."""
    iterator = iter(items)
    if getattr(_in_pool, "active", False):
        yield from iterator
        return

    def advance() -> object:
        return next(iterator, _END)

    def fetch() -> Future[object]:
        return _executor().submit(contextvars.copy_context().run, advance)

    pending = fetch()
    try:
        while (item := pending.result()) is not _END:
            pending = fetch()
            yield cast(T, item)
    finally:
        wait([pending])
