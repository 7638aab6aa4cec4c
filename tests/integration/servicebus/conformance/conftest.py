"""The target of the conformance steps: the emulator (the plugin's fixture, by default) or a real
namespace whose connection string the user supplies, so the same steps run against both.

    SERVICEBUS_CONFORMANCE_CONNECTION_STRING='Endpoint=sb://<ns>.servicebus.windows.net/;...' \\
        pytest tests/integration/servicebus/conformance

The string needs Manage rights: each step creates the entities it uses (uniquely named) through the
administration client and deletes them afterwards, so it touches nothing else in the namespace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient
from servicebus_emulator import RunningEmulator

CONNECTION_VARIABLE = "SERVICEBUS_CONFORMANCE_CONNECTION_STRING"


@dataclass(frozen=True)
class Target:
    """Where the steps run: its two connection strings and, for the emulator, the certificate the
    administration client trusts."""

    name: str
    connection_string: str
    management_connection_string: str
    certificate_path: str | None = None

    def admin(self) -> ServiceBusAdministrationClient:
        options: dict[str, Any] = {"retry_total": 0}
        if self.certificate_path is not None:
            options["connection_verify"] = self.certificate_path
        return ServiceBusAdministrationClient.from_connection_string(
            self.management_connection_string, **options
        )

    def client(self) -> ServiceBusClient:
        return ServiceBusClient.from_connection_string(self.connection_string)


MANAGEMENT_VARIABLE = "SERVICEBUS_CONFORMANCE_MANAGEMENT_CONNECTION_STRING"
CA_VARIABLE = "SERVICEBUS_CONFORMANCE_CA_FILE"


def remote_target() -> Target | None:
    """The namespace of ``SERVICEBUS_CONFORMANCE_CONNECTION_STRING``, if set. On Azure its management
    plane is the same endpoint over HTTPS with a public certificate; another emulator (Microsoft's,
    or one of these on other ports) gives its management string and CA file in the two others."""
    connection = os.environ.get(CONNECTION_VARIABLE, "").strip()
    if not connection:
        return None
    management = os.environ.get(MANAGEMENT_VARIABLE, "").strip() or connection
    return Target("remote", connection, management, os.environ.get(CA_VARIABLE, "").strip() or None)


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    remote = remote_target()
    if remote is not None:
        return remote
    emulator: RunningEmulator = request.getfixturevalue("servicebus_emulator")
    return Target(
        "emulator",
        emulator.connection_string,
        emulator.management_connection_string,
        str(emulator.certificate_path),
    )


@pytest.fixture
def names(target: Target) -> Iterator[Any]:
    """``names.queue(**properties)`` / ``names.topic(...)``: an entity of this step, created now and
    deleted after it (with everything under it)."""
    made: list[tuple[str, str]] = []
    admin = target.admin()

    class Names:
        prefix = f"conformance-{uuid.uuid4().hex[:8]}"

        def queue(self, suffix: str = "q", **properties: Any) -> str:
            name = f"{self.prefix}-{suffix}"
            admin.create_queue(name, **properties)
            made.append(("queue", name))
            return name

        def topic(self, suffix: str = "t", **properties: Any) -> str:
            name = f"{self.prefix}-{suffix}"
            admin.create_topic(name, **properties)
            made.append(("topic", name))
            return name

    with admin:
        yield Names()
        for kind, name in reversed(made):
            (admin.delete_queue if kind == "queue" else admin.delete_topic)(name)
