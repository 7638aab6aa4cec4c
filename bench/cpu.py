"""CPU seconds per process over a benchmark's window, so a reader sees which process is the bottleneck.

``CpuMeter`` snapshots each named process's CPU time (user + system, its own threads plus any child
processes it spawned) when entered and when left, and the whole machine's busy time over the same
window: on a shared machine, the share taken by other work says how noisy the figures are.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

import psutil


def _cpu_seconds(process: psutil.Process, *, descendants: bool) -> float:
    """The process's CPU time, plus that of its live descendants if asked (Azurite's node may spawn
    helpers; the bench's own children are the stack's components, counted under their own names)."""
    total = 0.0
    for each in (process, *(process.children(recursive=True) if descendants else ())):
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _machine_busy_seconds() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


@dataclass
class CpuMeter:
    """``with CpuMeter({"host": pid, ...}, own_only={"bench"}) as meter: ...`` then ``meter.report()``.

    A process named in ``own_only`` is counted without its descendants."""

    pids: Mapping[str, int]
    own_only: frozenset[str] = frozenset()
    _processes: dict[str, psutil.Process] = field(default_factory=dict)
    _start: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0
    machine_busy: float = 0.0
    _started_at: float = 0.0
    _machine_start: float = 0.0

    def __enter__(self) -> CpuMeter:
        self._processes = {name: psutil.Process(pid) for name, pid in self.pids.items()}
        self._machine_start = _machine_busy_seconds()
        self._started_at = time.perf_counter()
        self._start = {name: self._measure(name) for name in self._processes}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.seconds = {name: self._measure(name) - self._start[name] for name in self._processes}
        self.wall = time.perf_counter() - self._started_at
        self.machine_busy = _machine_busy_seconds() - self._machine_start

    def _measure(self, name: str) -> float:
        return _cpu_seconds(self._processes[name], descendants=name not in self.own_only)

    def report(self) -> str:
        """One line per process, busiest first: CPU seconds and the share of one core over the window."""
        cores = psutil.cpu_count() or 1
        lines = [f"CPU over the burst ({self.wall:.1f} s wall, {cores} cores):"]
        for name, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            lines.append(f"  {name:<22} {seconds:6.1f} s  ({seconds / self.wall:4.0%} of a core)")
        ours = sum(self.seconds.values())
        others = max(0.0, self.machine_busy - ours)
        lines.append(
            f"  {'machine busy':<22} {self.machine_busy:6.1f} s  "
            f"({self.machine_busy / (self.wall * cores):4.0%} of {cores} cores; "
            f"{others:.1f} s of it not this bench's processes)"
        )
        return "\n".join(lines)
