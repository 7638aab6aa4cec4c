"""The emulator's own tests use it as any project would: through the pytest plugin the
servicebus-emulator distribution installs. Each test gets a fresh emulator (in memory, free ports)
serving ``emulator_config()`` (short locks and TTLs, so expiry tests take seconds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from servicebus_emulator import RunningEmulator

from tests.integration.servicebus.support import emulator_config


@pytest.fixture(scope="session")
def servicebus_emulator_config() -> dict[str, Any]:
    return emulator_config()


@pytest.fixture
def emulator(servicebus_emulator: RunningEmulator) -> RunningEmulator:
    """The plugin's per-test emulator, under the name these tests use."""
    return servicebus_emulator


@pytest.fixture
def start(servicebus_emulator_factory: Callable[..., RunningEmulator]) -> Callable[..., RunningEmulator]:
    """Start extra emulators (custom config or options); all are stopped after the test."""
    return servicebus_emulator_factory


@pytest.fixture
def client(emulator: RunningEmulator) -> Iterator[ServiceBusClient]:
    """A real ServiceBusClient connected to the per-test emulator."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb_client:
        yield sb_client
