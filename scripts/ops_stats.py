"""Message counts behind `claimcheck-ops stats`: the management plane's runtime properties, read with
ServiceBusAdministrationClient on Azure and on the emulator alike (one code path)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scripts.ops_errors import OpsError
from scripts.ops_servicebus import BusTarget, Entity

if TYPE_CHECKING:
    from azure.servicebus.management import ServiceBusAdministrationClient

# Microsoft's emulator layout: AMQP on 5672, the management plane on 5300 (the installer's README).
EMULATOR_AMQP_PORT = 5672
EMULATOR_MANAGEMENT_PORT = 5300
_ENDPOINT = re.compile(r"(Endpoint=sb://[^;:/]+)(?::(\d+))?/?;", re.IGNORECASE)


@dataclass(frozen=True)
class EntityCounts:
    """Message counts of one entity; None where the service does not count that (see `detail`)."""

    entity: str
    active: int | None
    dead_letter: int | None
    scheduled: int | None
    detail: str = ""


def management_connection_string(target: BusTarget, management: str | None) -> str | None:
    """The connection string for the administration client, None for Entra ID (namespace).

    Azure serves management on the namespace's own endpoint. An emulator serves it on another
    port: the one given, or Microsoft's 5300 when AMQP is on its default 5672."""
    if management:
        return management
    if not target.connection_string or not target.is_emulator:
        return target.connection_string
    match = _ENDPOINT.search(target.connection_string)
    port = int(match.group(2)) if match and match.group(2) else EMULATOR_AMQP_PORT
    if match is None or port != EMULATOR_AMQP_PORT:
        raise OpsError(
            "the emulator's management plane has its own port (Microsoft's layout: 5300 beside "
            "AMQP 5672): give --management-connection-string (CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION), "
            "the '(management)' line the emulator prints on start"
        )
    return _ENDPOINT.sub(lambda m: f"{m.group(1)}:{EMULATOR_MANAGEMENT_PORT};", target.connection_string, 1)


def administration_client_for(target: BusTarget, management: str | None) -> ServiceBusAdministrationClient:
    """The administration client `stats` uses; `reconcile` reads its dead-letter counts with it too."""
    return _client(target, management)


def _client(target: BusTarget, management: str | None) -> ServiceBusAdministrationClient:
    # An operator is waiting at a terminal: one quick retry instead of the SDK's long ones.
    retry: dict[str, Any] = {"retry_total": 1, "retry_backoff_factor": 0.5, "retry_backoff_max": 2}
    connection = management_connection_string(target, management)
    if connection:
        from local.servicebus.admin_client import administration_client

        return administration_client(connection, **retry)
    from azure.identity import DefaultAzureCredential
    from azure.servicebus.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(str(target.namespace), DefaultAzureCredential(), **retry)


def entity_counts(target: BusTarget, management: str | None = None) -> list[EntityCounts]:
    """Exact counts from the runtime properties of every queue, topic and subscription."""
    from azure.core.exceptions import ServiceRequestError

    counts: list[EntityCounts] = []
    try:
        with _client(target, management) as admin:
            for queue in admin.list_queues_runtime_properties():
                counts.append(
                    EntityCounts(
                        queue.name,
                        queue.active_message_count,
                        queue.dead_letter_message_count,
                        queue.scheduled_message_count,
                        detail="queue",
                    )
                )
            for topic in admin.list_topics_runtime_properties():
                counts.append(EntityCounts(topic.name, None, None, topic.scheduled_message_count, "topic"))
                for subscription in admin.list_subscriptions_runtime_properties(topic.name):
                    counts.append(
                        EntityCounts(
                            str(Entity(topic.name, subscription.name)),
                            subscription.active_message_count,
                            subscription.dead_letter_message_count,
                            None,
                            detail="subscription",
                        )
                    )
    except ServiceRequestError as exc:
        reason = str(exc).splitlines()[0]
        raise OpsError(f"cannot reach the Service Bus management endpoint: {reason}") from None
    return counts
