"""Where a trigger's workers spend their time: wall seconds per phase, summed over all workers.

The listener logs the totals when it stops, so a bench run (or anyone reading the host log) sees
what the workers waited on: accepting a session, invoking the function, waiting for a session's
next message, releasing the session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseClock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._cpu: dict[str, float] = {}

    @contextmanager
    def timing(self, phase: str, *, failed_as: str | None = None) -> Iterator[None]:
        """Time the block as ``phase``; if it raises, as ``failed_as`` when given."""
        started, cpu_started = time.perf_counter(), time.thread_time()
        name = phase
        try:
            yield
        except BaseException:
            name = failed_as or phase
            raise
        finally:
            self.add(name, time.perf_counter() - started, cpu=time.thread_time() - cpu_started)

    def add(self, phase: str, seconds: float, *, cpu: float = 0.0) -> None:
        """``seconds`` of wall time, ``cpu`` of them the calling thread's own CPU time."""
        with self._lock:
            self._seconds[phase] = self._seconds.get(phase, 0.0) + seconds
            self._cpu[phase] = self._cpu.get(phase, 0.0) + cpu
            self._counts[phase] = self._counts.get(phase, 0) + 1

    def summary(self) -> str:
        """``phase 12.3 s / 200 (62 ms each, 4.1 ms CPU), ...`` in the order first seen (the
        CPU figure is the worker thread's own: work the phase hands to other threads is not in it)."""
        with self._lock:
            return ", ".join(self._line(name, count) for name, count in self._counts.items())

    def _line(self, name: str, count: int) -> str:
        seconds, cpu = self._seconds[name], self._cpu[name]
        cpu_part = f", {cpu / count * 1000:.1f} ms CPU" if cpu else ""
        return f"{name} {seconds:.1f} s / {count} ({seconds / count * 1000:.0f} ms each{cpu_part})"
