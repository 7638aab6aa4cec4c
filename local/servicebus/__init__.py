"""Embedded Azure Service Bus emulator: a pure-Python AMQP 1.0 broker for the real azure-servicebus SDK.

Start it with ``python -m local.servicebus --config Config.json`` or, from Python/pytest,
``start_emulator(config)`` (in-process thread) / ``start_emulator_process(path)`` (subprocess).
"""

from local.servicebus.cbs import SharedAccessKey
from local.servicebus.config import ConfigError, parse_config
from local.servicebus.server import (
    DEFAULT_KEY,
    RunningEmulator,
    connection_string,
    start_emulator,
    start_emulator_process,
)

__all__ = [
    "DEFAULT_KEY",
    "ConfigError",
    "RunningEmulator",
    "SharedAccessKey",
    "connection_string",
    "parse_config",
    "start_emulator",
    "start_emulator_process",
]
