"""A local Azure Functions host for Python v2 apps: HTTP, Service Bus and timer triggers.

Azure Functions Core Tools cannot run here, so this host does what Core Tools plus the Python worker
do for our app: read the app's bindings, host.json and local.settings.json, and run every trigger
against real local services (the embedded Service Bus emulator through the real SDK).

The names below load on first use: the stack launcher imports ``local.functions_host.instances``
without paying for the Functions and Service Bus SDKs the host itself needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from local.functions_host.app_loader import FunctionAppError
    from local.functions_host.host import DEFAULT_APP, RunningHost, start_host
    from local.functions_host.host_config import HostConfigError

_WHERE = {
    "DEFAULT_APP": "local.functions_host.host",
    "FunctionAppError": "local.functions_host.app_loader",
    "HostConfigError": "local.functions_host.host_config",
    "RunningHost": "local.functions_host.host",
    "start_host": "local.functions_host.host",
}

__all__ = [
    "DEFAULT_APP",
    "FunctionAppError",
    "HostConfigError",
    "RunningHost",
    "start_host",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
