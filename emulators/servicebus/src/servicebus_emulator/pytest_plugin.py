"""pytest plugin (registered by the distribution's ``pytest11`` entry point): an emulator per test
or per session, on free ports, from a Config.json or a Config.json-shaped dict.

Fixtures:

- ``servicebus_emulator``: a running emulator (``RunningEmulator``: ``connection_string``,
  ``management_connection_string``, ``certificate_path``, ``port``, ``management_port``); stopped
  after the test, or after the session when the isolation is ``session``.
- ``servicebus_connection_string`` / ``servicebus_management_connection_string``: its two strings.
- ``servicebus_certificate_path``: the management plane's generated TLS certificate (a ``str``),
  for ``ServiceBusAdministrationClient.from_connection_string(..., connection_verify=path)``.
- ``servicebus_emulator_factory``: ``factory(config=None, **start_options)`` starts more emulators
  (other entities, ``max_message_size``, ``key=None``...), all stopped after the test.
- ``servicebus_emulator_config``: what the emulators serve. By default the ini option
  ``servicebus_emulator_config`` (a Config.json path relative to the rootdir), else a namespace with
  no entities; override the fixture to return a dict or a path of your own.

Isolation: ini ``servicebus_emulator_isolation = test`` (default: a fresh emulator, and so fresh
state, for each test) or ``session`` (one emulator shared by the session's tests). A test marked
``@pytest.mark.servicebus_emulator(config, **start_options)`` gets an emulator of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servicebus_emulator.server import EMPTY_NAMESPACE, RunningEmulator, start

CONFIG_INI = "servicebus_emulator_config"
ISOLATION_INI = "servicebus_emulator_isolation"
ISOLATIONS = ("test", "session")
MARKER = "servicebus_emulator"

Config = dict[str, Any] | Path | str


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(CONFIG_INI, "Config.json the servicebus_emulator fixture serves (rootdir-relative)")
    parser.addini(
        ISOLATION_INI, "servicebus_emulator state: 'test' (fresh per test) or 'session'", default="test"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(config=None, **start_options): this test gets an emulator of its own"
    )
    _isolation(config)  # a bad value stops the run before any test, naming the option


@pytest.fixture(scope="session")
def servicebus_emulator_config(pytestconfig: pytest.Config) -> Config:
    """The Config.json (path or document) the emulators serve; override to supply your own."""
    path = str(pytestconfig.getini(CONFIG_INI) or "")
    return pytestconfig.rootpath / path if path else EMPTY_NAMESPACE


def _isolation(config: pytest.Config) -> str:
    isolation = str(config.getini(ISOLATION_INI)).strip().lower()
    if isolation not in ISOLATIONS:
        raise pytest.UsageError(f"{ISOLATION_INI} = {isolation!r}: expected one of {', '.join(ISOLATIONS)}")
    return isolation


@pytest.fixture(scope="session")
def _servicebus_emulator_session(servicebus_emulator_config: Config) -> Iterator[RunningEmulator]:
    with start(servicebus_emulator_config) as emulator:
        yield emulator


@pytest.fixture
def servicebus_emulator_factory(
    servicebus_emulator_config: Config,
) -> Iterator[Callable[..., RunningEmulator]]:
    """Start emulators with their own config or options; all are stopped after the test."""
    started: list[RunningEmulator] = []

    def factory(config: Config | None = None, **options: Any) -> RunningEmulator:
        emulator = start(servicebus_emulator_config if config is None else config, **options)
        started.append(emulator)
        return emulator

    yield factory
    for emulator in reversed(started):
        emulator.stop()


@pytest.fixture
def servicebus_emulator(
    request: pytest.FixtureRequest, servicebus_emulator_factory: Callable[..., RunningEmulator]
) -> RunningEmulator:
    """A running emulator: the test's own, or the session's (``servicebus_emulator_isolation``)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        return servicebus_emulator_factory(*marker.args, **marker.kwargs)
    if _isolation(request.config) == "session":
        emulator: RunningEmulator = request.getfixturevalue("_servicebus_emulator_session")
        return emulator
    return servicebus_emulator_factory()


@pytest.fixture
def servicebus_connection_string(servicebus_emulator: RunningEmulator) -> str:
    """The data-plane (AMQP) connection string, for ``ServiceBusClient.from_connection_string``."""
    return servicebus_emulator.connection_string


@pytest.fixture
def servicebus_management_connection_string(servicebus_emulator: RunningEmulator) -> str:
    """The management-plane connection string, for ``ServiceBusAdministrationClient``."""
    return servicebus_emulator.management_connection_string


@pytest.fixture
def servicebus_certificate_path(servicebus_emulator: RunningEmulator) -> str:
    """The management plane's self-signed certificate (PEM) that administration clients trust."""
    return str(servicebus_emulator.certificate_path)
