"""Child-process helpers shared by every local service launcher."""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Callable

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
