"""The local host's accept shim: no SDK nap on a session worker's accept, the SDK's naps everywhere else.

(That session receiving still works through it is covered by tests/integration/functions_host.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import azure.servicebus._servicebus_receiver
import pytest

from local.functions_host.phase_clock import PhaseClock
from local.functions_host.prompt_accept import install, prompt_accept

# The SDK module whose ``time`` the shim replaces (untyped access: it does not export ``time``).
receiver_module: Any = azure.servicebus._servicebus_receiver


@pytest.fixture
def naps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What the SDK's receiver module asks ``time.sleep`` for, recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(time, "sleep", asked.append)
    install()
    return asked


def test_the_sdk_module_keeps_the_rest_of_time() -> None:
    install()
    assert receiver_module.time.monotonic is time.monotonic
    assert receiver_module.time.time is time.time


def test_only_the_accepting_thread_skips_the_nap(naps: list[float]) -> None:
    receiver_module.time.sleep(0.05)
    with prompt_accept():
        receiver_module.time.sleep(0.05)
        other = threading.Thread(target=receiver_module.time.sleep, args=(0.05,))
        other.start()
        other.join()
    receiver_module.time.sleep(0.05)
    # Outside the block, the accepting thread inside it (yields, no nap), another thread meanwhile, after.
    assert sorted(naps) == [0, 0.05, 0.05, 0.05]
    assert naps[1] == 0


def test_install_is_idempotent() -> None:
    install()
    shim = receiver_module.time
    install()
    assert receiver_module.time is shim


def test_phase_clock_summary_names_phases_and_events() -> None:
    clock = PhaseClock()
    clock.add("invoke", 0.5, cpu=0.01)
    clock.add("invoke", 1.5, cpu=0.03)
    clock.add("release", 0.25)
    assert clock.summary() == "invoke 2.0 s / 2 (1000 ms each, 20.0 ms CPU), release 0.2 s / 1 (250 ms each)"


def test_phase_clock_times_a_failed_block_under_its_own_name() -> None:
    clock = PhaseClock()
    with pytest.raises(TimeoutError), clock.timing("accept", failed_as="no session"):
        raise TimeoutError
    with clock.timing("accept", failed_as="no session"):
        pass
    assert clock.summary().startswith("no session ")
    assert ", accept " in clock.summary()
