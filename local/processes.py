"""Child-process helpers shared by every local service launcher."""

from __future__ import annotations

import ctypes
import logging  # noqa: F401 - before the at-fork hooks below: its own must run inside them (_Fork)
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from local.ports import PortInUse, ensure_port_free, wait_for_port

REPO_ROOT = Path(__file__).resolve().parent.parent
_STOP_GRACE_SECONDS = 15.0
_READY_TIMEOUT_SECONDS = 60.0

_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>
# Loaded here, not in the forked child, where only async-signal-safe work belongs.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent(stop_signal: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``stop_signal`` when the launching thread dies,
    even by SIGKILL, so that a killed launcher or test session leaves nothing behind (Linux only;
    elsewhere None, and the launcher's own cleanup is all there is)."""
    if _LIBC is None:
        return None
    libc = _LIBC

    def set_parent_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, stop_signal)

    return set_parent_death_signal


class _Fork:
    """Whether this process is forking a child right now (os.register_at_fork hooks). Python ignores
    an exception raised inside an at-fork callback (it prints "Exception ignored in ..." and goes on),
    and the standard library runs one after every fork (logging's lock release): a Ctrl-C that lands
    there would raise KeyboardInterrupt into nothing, and be lost."""

    active = False
    interrupted = False


def _fork_begins() -> None:
    _Fork.active = True


def _fork_ends() -> None:
    _Fork.active = False


# Registered after logging's hooks (imported above): "before" hooks run in reverse order of
# registration and "after" hooks in order, so ours enclose logging's.
os.register_at_fork(before=_fork_begins, after_in_parent=_fork_ends, after_in_child=_fork_ends)


def interrupt_handler(signal_number: int, frame: object) -> None:
    """SIGINT as KeyboardInterrupt, as Python's default, except while a child is being forked: then it is
    kept for ``raise_if_interrupted()``, which the launchers call right after each start."""
    if _Fork.active:
        _Fork.interrupted = True
        return
    raise KeyboardInterrupt


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that came while a child was being forked."""
    if _Fork.interrupted:
        _Fork.interrupted = False
        raise KeyboardInterrupt


def _accepts_connections(port: int) -> bool:
    try:
        wait_for_port(port, timeout=0)
    except TimeoutError:
        return False
    return True


@dataclass
class ChildProcess:
    """One component run as a child process in its own process group, logging to a file."""

    name: str
    command: list[str]
    port: int
    log_path: Path
    # Other ports the process serves (checked free before it starts, awaited like ``port``).
    other_ports: tuple[int, ...] = ()
    # Also awaited: this text in the log written since the start (for a process whose port answers
    # before all of it serves, e.g. the first of several Functions host instances).
    ready_text: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, timeout: float = _READY_TIMEOUT_SECONDS) -> None:
        """Start the process and wait until its port accepts connections (or it exits: then raise).

        Raises ``PortInUse`` first if something already listens on the port: otherwise that listener
        would answer the readiness probe while our own process dies on its failed bind."""
        for port in (self.port, *self.other_ports):
            ensure_port_free(port, self.name)
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own Python modules
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        deadline = time.monotonic() + timeout
        ports = (self.port, *self.other_ports)
        raise_if_interrupted()  # now that self.process is set, so that the caller's cleanup stops it
        while (
            not all(map(_accepts_connections, ports))
            or not self._logged_ready(log_offset)
            or self.process.poll() is not None
        ):
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"{self.name} exited with {code} while starting; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.1)

    def _logged_ready(self, offset: int) -> bool:
        if self.ready_text is None:
            return True
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return self.ready_text.encode() in log.read()

    def exit_code(self) -> int | None:
        """The exit code if the process was started and has exited on its own since; else None."""
        return None if self.process is None else self.process.poll()

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
        self._signal(signal.SIGTERM, wait=_STOP_GRACE_SECONDS)

    def kill(self) -> None:
        """SIGKILL at once: a crash, as far as the rest of the stack can tell."""
        self._signal(signal.SIGKILL, wait=_STOP_GRACE_SECONDS)

    def _signal(self, signal_number: int, *, wait: float) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal_number)
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=wait)
        # The leader's own children (a host's instances) are in its group too, and a killed process
        # with many threads closes its sockets only once the last thread is gone: wait until its ports
        # are free, so that a start right after does not find them taken.
        deadline = time.monotonic() + wait
        while not all(map(_port_free, (self.port, *self.other_ports))) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.process = None


def _port_free(port: int) -> bool:
    try:
        ensure_port_free(port, "")
    except PortInUse:
        return False
    return True
