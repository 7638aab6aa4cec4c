"""Message counts behind `claimcheck-ops stats`: runtime properties on Azure, browsing on the emulator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.ops_errors import OpsError
from scripts.ops_servicebus import BusTarget, Entity, first_line, peek_pages, receiver_for, summarize

if TYPE_CHECKING:
    from azure.servicebus import ServiceBusClient


@dataclass(frozen=True)
class EntityCounts:
    """Message counts of one entity; None where the count cannot be obtained (see `detail`)."""

    entity: str
    active: int | None
    dead_letter: int | None
    scheduled: int | None
    detail: str = ""


def _emulator_entities(config_path: Path) -> list[Entity]:
    """Queues and subscriptions declared in an emulator Config.json."""
    entities: list[Entity] = []
    try:
        document = json.loads(config_path.read_text(encoding="utf-8"))
        namespaces: list[Mapping[str, Any]] = document["UserConfig"]["Namespaces"]
        for namespace in namespaces:
            entities.extend(Entity(queue["Name"]) for queue in namespace.get("Queues", []))
            for topic in namespace.get("Topics", []):
                entities.extend(
                    Entity(topic["Name"], subscription["Name"])
                    for subscription in topic.get("Subscriptions", [])
                )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OpsError(f"cannot read the emulator config {config_path}: {type(exc).__name__} {exc}") from None
    return entities


def _count_by_peeking(client: ServiceBusClient, entity: Entity, limit: int) -> EntityCounts:
    """Counts by browsing, capped at `limit` (emulator only; Azure gives exact runtime properties)."""
    from azure.servicebus.exceptions import ServiceBusError

    with receiver_for(client, entity, dead_letter=True) as receiver:
        dead_letter = sum(1 for _ in peek_pages(receiver, limit))
    try:
        # The emulator browses a session entity across sessions, as a management-only peek would.
        with receiver_for(client, entity, dead_letter=False) as receiver:
            states = [summarize(message).state for message in peek_pages(receiver, limit)]
    except ServiceBusError as exc:
        return EntityCounts(str(entity), None, dead_letter, None, f"active not browsable: {first_line(exc)}")
    capped = " (capped)" if max(dead_letter, len(states)) >= limit else ""
    return EntityCounts(
        str(entity),
        active=sum(1 for state in states if state != "scheduled"),
        dead_letter=dead_letter,
        scheduled=states.count("scheduled"),
        detail=f"peek-based{capped}",
    )


def _runtime_counts(target: BusTarget) -> list[EntityCounts]:
    """Exact counts from the management API (Azure): every queue and every subscription."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    if target.connection_string:
        admin = ServiceBusAdministrationClient.from_connection_string(target.connection_string)
    else:
        from azure.identity import DefaultAzureCredential

        admin = ServiceBusAdministrationClient(str(target.namespace), DefaultAzureCredential())
    counts: list[EntityCounts] = []
    with admin:
        for queue in admin.list_queues_runtime_properties():
            counts.append(
                EntityCounts(
                    queue.name,
                    queue.active_message_count,
                    queue.dead_letter_message_count,
                    queue.scheduled_message_count,
                    "runtime properties",
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
                        "runtime properties",
                    )
                )
    return counts


def entity_counts(target: BusTarget, config: Path | None, limit: int) -> list[EntityCounts]:
    """Counts for every queue and subscription: browsed on the emulator (entities from `config`)."""
    if not target.is_emulator:
        return _runtime_counts(target)
    if config is None:
        raise OpsError(
            "stats on the emulator needs --config PATH (CLAIMCHECK_SERVICEBUS_CONFIG) to list its entities"
        )
    entities = _emulator_entities(config)
    with target.client() as client:
        return [_count_by_peeking(client, entity, limit) for entity in entities]
