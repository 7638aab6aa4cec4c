"""claimcheck.concurrently: two calls at once, and a transfer read one chunk ahead."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator

import pytest
from claimcheck.concurrently import all_three, both, read_ahead, settled

REQUEST = contextvars.ContextVar("request", default="none")


def test_both_runs_the_two_calls_at_once() -> None:
    """Each call waits for the other to start: in sequence this would never finish."""
    started = threading.Barrier(2, timeout=10)

    def first() -> str:
        started.wait()
        return "first"

    def second() -> str:
        started.wait()
        return "second"

    assert both(first, second) == ("first", "second")


def test_both_waits_for_the_second_call_when_the_first_fails() -> None:
    """Nothing keeps running behind the caller's back: the error is raised after the other call ended."""
    finished = threading.Event()
    release = threading.Event()

    def first() -> None:
        release.set()
        raise KeyError("first failed")

    def second() -> None:
        release.wait(10)
        finished.set()

    with pytest.raises(KeyError):
        both(first, second)
    assert finished.is_set()


def test_both_raises_the_second_calls_error() -> None:
    def second() -> None:
        raise ValueError("second failed")

    with pytest.raises(ValueError, match="second failed"):
        both(lambda: 1, second)


def test_both_carries_the_callers_context_to_the_second_call() -> None:
    """E.g. the current OpenTelemetry span: the pool's call is its child, not a stray root."""
    REQUEST.set("intake-7")
    assert both(REQUEST.get, REQUEST.get) == ("intake-7", "intake-7")


def test_nested_both_on_a_pool_thread_runs_in_sequence() -> None:
    """A pool thread never waits on the pool for its own work (a full pool cannot deadlock)."""
    threads: list[str] = []

    def inner() -> str:
        return threading.current_thread().name

    def outer() -> tuple[str, str]:
        threads.append(threading.current_thread().name)
        return both(inner, inner)

    _, nested = both(lambda: None, outer)
    assert nested == (threads[0], threads[0])


def test_read_ahead_yields_every_item_in_order_fetching_the_next_one_meanwhile() -> None:
    fetched: list[int] = []
    consumed: list[int] = []

    def chunks() -> Iterator[int]:
        for index in range(5):
            fetched.append(index)
            yield index

    for item in read_ahead(chunks()):
        consumed.append(item)
        # By the time the caller works on item n, item n + 1 is being (or has been) fetched.
        assert len(fetched) >= min(item + 1, 5)
    assert consumed == [0, 1, 2, 3, 4]


def test_read_ahead_raises_the_sources_error_in_the_caller() -> None:
    def chunks() -> Iterator[bytes]:
        yield b"a"
        raise OSError("range read failed")

    with pytest.raises(OSError, match="range read failed"):
        list(read_ahead(chunks()))


def test_read_ahead_left_early_waits_for_the_fetch_in_flight() -> None:
    proceed = threading.Event()
    second_fetched = threading.Event()

    def chunks() -> Iterator[int]:
        yield 0
        proceed.wait(10)  # the fetch of item 1 is still under way when the caller stops
        second_fetched.set()
        yield 1

    ahead = read_ahead(chunks())
    assert next(ahead) == 0
    threading.Timer(0.2, proceed.set).start()
    ahead.close()  # the caller stops (e.g. the length check failed)
    assert second_fetched.is_set()


def test_all_three_runs_the_three_calls_at_once() -> None:
    """Each call waits for the two others to start: in sequence this would never finish."""
    started = threading.Barrier(3, timeout=10)

    def call(name: str) -> Callable[[], str]:
        def run() -> str:
            started.wait()
            return name

        return run

    assert all_three(call("a"), call("b"), call("c")) == ("a", "b", "c")


def test_settled_calls_answer_every_outcome_instead_of_raising() -> None:
    """One call failing does not hide the others' results: the caller can undo what succeeded."""

    def fails() -> str:
        raise KeyError("gone")

    first, second, third = all_three(settled(lambda: "a"), settled(fails), settled(lambda: "c"))
    assert (first.get(), third.get()) == ("a", "c")
    assert isinstance(second.error, KeyError)
    with pytest.raises(KeyError):
        second.get()
