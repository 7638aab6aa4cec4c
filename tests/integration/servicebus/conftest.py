"""Fixtures: an in-process Service Bus emulator per test (free port, in-memory store, short locks and
TTLs so expiry tests take seconds) and real azure-servicebus clients connected to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from local.servicebus import RunningEmulator, start_emulator
from tests.integration.servicebus.support import emulator_config


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    """An in-process emulator with ``emulator_config()`` on a free port."""
    with start_emulator(emulator_config()) as running:
        yield running


@pytest.fixture
def start() -> Iterator[Callable[..., RunningEmulator]]:
    """Start extra emulators (custom config or options); all are stopped after the test."""
    started: list[RunningEmulator] = []

    def starter(config: dict[str, Any] | None = None, **options: Any) -> RunningEmulator:
        running = start_emulator(config or emulator_config(), **options)
        started.append(running)
        return running

    yield starter
    for running in started:
        running.stop()


@pytest.fixture
def client(emulator: RunningEmulator) -> Iterator[ServiceBusClient]:
    """A real ServiceBusClient connected to the per-test emulator."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb_client:
        yield sb_client
