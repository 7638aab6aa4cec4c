"""A local Azure Functions host for Python v2 apps: HTTP, Service Bus and timer triggers.

Azure Functions Core Tools cannot run here, so this host does what Core Tools plus the Python worker
do for our app: read the app's bindings, host.json and local.settings.json, and run every trigger
against real local services (the embedded Service Bus emulator through the real SDK).
"""

from local.functions_host.app_loader import FunctionAppError
from local.functions_host.host import DEFAULT_APP, RunningHost, start_host
from local.functions_host.host_config import HostConfigError

__all__ = [
    "DEFAULT_APP",
    "FunctionAppError",
    "HostConfigError",
    "RunningHost",
    "start_host",
]
