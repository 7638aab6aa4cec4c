"""Message counts behind `claimcheck-ops stats`: runtime properties on Azure, the store on the emulator."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.ops_errors import OpsError
from scripts.ops_servicebus import BusTarget, Entity


@dataclass(frozen=True)
class EntityCounts:
    """Message counts of one entity; None where the source does not give that count (see `detail`)."""

    entity: str
    active: int | None
    dead_letter: int | None
    scheduled: int | None
    oldest_age_s: float | None = None
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


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _store_counts(data_dir: Path, entities: list[Entity]) -> list[EntityCounts]:
    """Exact counts read from the emulator's SQLite store (read-only, safe while it runs)."""
    from local.servicebus.stats import read_counts

    # The store keys entities by lower-case path, a subscription as "topic/subscriptions/name".
    paths = [str(entity).lower() for entity in entities]
    try:
        by_path = read_counts(data_dir, paths)
    except FileNotFoundError:
        raise OpsError(
            f"no emulator store in {data_dir}: give the directory the emulator was started with "
            "(--data; the local stack's is .local-stack/servicebus)"
        ) from None
    except sqlite3.Error as exc:
        raise OpsError(f"cannot read the emulator store in {data_dir}: {exc}") from None
    return [
        EntityCounts(
            str(entity),
            active=counts["active_message_count"],
            dead_letter=counts["dead_letter_message_count"],
            scheduled=counts["scheduled_message_count"],
            oldest_age_s=_rounded(counts["oldest_message_age_seconds"]),
            detail="emulator store",
        )
        for entity, counts in zip(entities, (by_path[path] for path in paths), strict=True)
    ]


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
                    detail="runtime properties",
                )
            )
        for topic in admin.list_topics_runtime_properties():
            counts.append(EntityCounts(topic.name, None, None, topic.scheduled_message_count, detail="topic"))
            for subscription in admin.list_subscriptions_runtime_properties(topic.name):
                counts.append(
                    EntityCounts(
                        str(Entity(topic.name, subscription.name)),
                        subscription.active_message_count,
                        subscription.dead_letter_message_count,
                        None,
                        detail="runtime properties",
                    )
                )
    return counts


def entity_counts(target: BusTarget, config: Path | None, emulator_data: Path | None) -> list[EntityCounts]:
    """Counts for every queue and subscription (on the emulator: those of `config`, from its store)."""
    if not target.is_emulator:
        return _runtime_counts(target)
    if config is None or emulator_data is None:
        needed = []
        if config is None:
            needed.append("--config PATH (CLAIMCHECK_SERVICEBUS_CONFIG) to list its entities")
        if emulator_data is None:
            needed.append("--emulator-data DIR (CLAIMCHECK_SERVICEBUS_DATA) to read its store")
        raise OpsError(f"stats on the emulator needs {' and '.join(needed)}")
    return _store_counts(emulator_data, _emulator_entities(config))
