"""A pure-Python Azure Service Bus emulator for the real SDKs: AMQP 1.0 data plane, ATOM management
plane, Microsoft's Config.json.

Start it with the ``servicebus-emulator`` console script (``python -m servicebus_emulator``), from
Python with ``start(config)`` (a thread in this process) or ``start_process(path)`` (a subprocess),
or in pytest with the ``servicebus_emulator`` fixture of the plugin this distribution installs.
"""

from servicebus_emulator.cbs import SharedAccessKey
from servicebus_emulator.config import ConfigError, parse_config
from servicebus_emulator.server import (
    DEFAULT_KEY,
    RunningEmulator,
    connection_string,
    start,
    start_process,
)

__all__ = [
    "DEFAULT_KEY",
    "ConfigError",
    "RunningEmulator",
    "SharedAccessKey",
    "connection_string",
    "parse_config",
    "start",
    "start_process",
]
