"""``ServiceBusAdministrationClient`` for a connection string, Azure's or an emulator's.

Microsoft's emulator serves its management plane over plain HTTP on port 5300; the .NET SDK honours
``UseDevelopmentEmulator=true`` there, but the Python SDK (7.15) always builds ``https://`` URLs
(the installer repository's README lists this limitation for the non-.NET SDKs). For an emulator
connection string the client therefore gets a transport that sends the same requests over plain
HTTP; every request, signature and parser stays the SDK's own. Azure connection strings are
untouched.
"""

from __future__ import annotations

from typing import Any

from azure.core.pipeline.transport import RequestsTransport
from azure.servicebus.management import ServiceBusAdministrationClient


class PlainHttpTransport(RequestsTransport):  # type: ignore[misc]  # azure-core ships it untyped
    """Sends the SDK's ``https://`` requests as ``http://`` (loopback development emulators only)."""

    def send(self, request: Any, **kwargs: Any) -> Any:
        if request.url.startswith("https://"):
            request.url = "http://" + request.url[len("https://") :]
        return super().send(request, **kwargs)


def is_emulator(connection_string: str) -> bool:
    """True when the connection string says ``UseDevelopmentEmulator=true``."""
    settings = (part.split("=", 1) for part in connection_string.split(";") if "=" in part)
    return any(
        k.strip().lower() == "usedevelopmentemulator" and v.strip().lower() == "true" for k, v in settings
    )


def administration_client(connection_string: str, **kwargs: Any) -> ServiceBusAdministrationClient:
    """The administration client for ``connection_string``; plain HTTP for a development emulator."""
    if is_emulator(connection_string):
        kwargs.setdefault("transport", PlainHttpTransport())
    return ServiceBusAdministrationClient.from_connection_string(connection_string, **kwargs)
