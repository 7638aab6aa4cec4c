"""Message counts behind `claimcheck-ops stats`: the management plane's runtime properties, read with
ServiceBusAdministrationClient on Azure and on the emulator alike (one code path)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
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
        from servicebus_emulator.admin_client import administration_client

        return administration_client(connection, **retry)
    from azure.identity import DefaultAzureCredential
    from azure.servicebus.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(str(target.namespace), DefaultAzureCredential(), **retry)


@dataclass(frozen=True)
class StackEntities:
    """The queues and subscriptions `stats` reads: those the stack declares, each by name. An operator's
    roles are entity-scoped (Data Owner on each queue and subscription, infra/program.py
    operator_grants), so listing the namespace would be refused; reading each entity is not."""

    queues: tuple[str, ...]
    subscriptions: tuple[Entity, ...]

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any], source: str) -> StackEntities:
        """From `pulumi stack output --json`: `queues` (a list) and `subscriptions` (topic -> list)."""
        queues, subscriptions = outputs.get("queues"), outputs.get("subscriptions")
        if not (isinstance(queues, list) and all(isinstance(name, str) for name in queues)):
            raise OpsError(f"{source}: output 'queues' must be a list of queue names, got {queues!r}")
        if not (
            isinstance(subscriptions, dict)
            and all(
                isinstance(names, list) and all(isinstance(name, str) for name in names)
                for names in subscriptions.values()
            )
        ):
            raise OpsError(
                f"{source}: output 'subscriptions' must map each topic to its subscription names, "
                f"got {subscriptions!r}"
            )
        return cls(
            tuple(queues),
            tuple(Entity(topic, name) for topic, names in subscriptions.items() for name in names),
        )

    @classmethod
    def from_file(cls, path: Path) -> StackEntities:
        try:
            outputs = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise OpsError(f"cannot read the stack outputs {path}: {type(exc).__name__}") from None
        if not isinstance(outputs, dict):
            raise OpsError(f"{path}: expected the JSON object `pulumi stack output --json` prints")
        return cls.from_outputs(outputs, str(path))

    @classmethod
    def default(cls) -> StackEntities:
        """The default topology's entities (infra/topology), when no stack outputs are given."""
        try:
            from infra.topology import load_topology
        except ImportError:
            raise OpsError(
                "name the stack's entities: --stack-outputs <file of `pulumi stack output --json`> "
                "(CLAIMCHECK_STACK_OUTPUTS)"
            ) from None
        topology = load_topology()
        return cls(
            tuple(queue.name for queue in topology.queues),
            tuple(Entity(topic.name, sub.name) for topic in topology.topics for sub in topic.subscriptions),
        )


def entity_counts(
    target: BusTarget, entities: StackEntities, management: str | None = None
) -> list[EntityCounts]:
    """Exact counts from the runtime properties of each named queue and subscription. An entity the
    namespace lacks is reported as such (`detail`), never a failure of the whole command."""
    from azure.core.exceptions import ResourceNotFoundError, ServiceRequestError

    counts: list[EntityCounts] = []
    try:
        with _client(target, management) as admin:
            for name in entities.queues:
                try:
                    queue = admin.get_queue_runtime_properties(name)
                except ResourceNotFoundError:
                    counts.append(EntityCounts(name, None, None, None, detail="queue not found"))
                    continue
                counts.append(
                    EntityCounts(
                        name,
                        queue.active_message_count,
                        queue.dead_letter_message_count,
                        queue.scheduled_message_count,
                        detail="queue",
                    )
                )
            for entity in entities.subscriptions:
                assert entity.subscription is not None
                try:
                    subscription = admin.get_subscription_runtime_properties(entity.name, entity.subscription)
                except ResourceNotFoundError:
                    counts.append(
                        EntityCounts(str(entity), None, None, None, detail="subscription not found")
                    )
                    continue
                counts.append(
                    EntityCounts(
                        str(entity),
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
