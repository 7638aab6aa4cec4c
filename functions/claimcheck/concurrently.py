"""Independent storage requests sent at once: the hot path waits one round trip for both, not two.

``read_ahead(chunks)`` does the same for a transfer: the next chunk is fetched while the caller
verifies and stores the current one (at most two chunks in memory).

``all_three(first, second, third)`` is the same for three calls, and ``settled(call)`` wraps a call so
that it answers ``Settled`` (its value or its exception) instead of raising: a caller that must undo
what succeeded when another call failed (release a claim, close a spool) sees every outcome.

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
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
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


def all_three(first: Callable[[], A], second: Callable[[], B], third: Callable[[], C]) -> tuple[A, B, C]:
    """``both`` for three calls: ``first`` on the calling thread, the others on the pool at once."""
    if getattr(_in_pool, "active", False):
        return first(), second(), third()
    pool = _executor()
    later_second = pool.submit(contextvars.copy_context().run, second)
    later_third = pool.submit(contextvars.copy_context().run, third)
    try:
        result = first()
    finally:
        pending: list[Future[Any]] = [later_second, later_third]
        wait(pending)  # nothing keeps running behind the caller's back
    return result, later_second.result(), later_third.result()


@dataclass(frozen=True)
class Settled(Generic[T]):
    """One call's outcome: its value, or the exception it raised (``get`` raises it again)."""

    value: T | None = None
    error: BaseException | None = None

    def get(self) -> T:
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def settled(call: Callable[[], T]) -> Callable[[], Settled[T]]:
    """``call`` answering its outcome instead of raising (for ``both``/``all_three``)."""

    def run() -> Settled[T]:
        try:
            return Settled(call())
        except BaseException as exc:  # handed to the caller, who decides (and re-raises with get())
            return Settled(error=exc)

    return run


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
