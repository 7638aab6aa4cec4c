"""Entities the management plane created, changed or deleted, as the store keeps them.

Each change is a JSON document under the entity's canonical path (``orders``,
``events/subscriptions/all``, ``events/subscriptions/all/rules/large``), in the order the entities
were first touched; a deletion is a tombstone. At start the broker builds Config.json's entities,
then replays these documents over them, so a created queue, a changed lock duration or a deleted
Config.json topic outlives a restart just as a Config.json entity does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import isodate

from servicebus_emulator.config import QueueSettings, TopicSettings
from servicebus_emulator.filters import (
    CorrelationFilter,
    FalseFilter,
    Filter,
    Rule,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
)

if TYPE_CHECKING:
    from servicebus_emulator.broker import Broker

Settings = TypeVar("Settings", QueueSettings, TopicSettings)
_CORRELATION_ATTRIBUTES = (
    "correlation_id",
    "message_id",
    "to",
    "reply_to",
    "label",
    "session_id",
    "reply_to_session_id",
    "content_type",
)


def settings_json(settings: QueueSettings | TopicSettings) -> dict[str, Any]:
    """Every field, durations as ISO 8601 (None: unlimited)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        out[field.name] = isodate.duration_isoformat(value) if isinstance(value, timedelta) else value
    return out


def settings_from_json(kind: type[Settings], document: Mapping[str, Any]) -> Settings:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(kind):
        value = document.get(field.name, field.default)
        is_duration = field.name in {"lock_duration", "default_ttl", "duplicate_window"}
        values[field.name] = isodate.parse_duration(value) if is_duration and value is not None else value
    return kind(**values)


def rule_json(rule: Rule) -> dict[str, Any]:
    found = rule.filter
    described: dict[str, Any]
    if isinstance(found, SqlFilter):
        described = {"type": "sql", "expression": found.expression, "parameters": dict(found.parameters)}
    elif isinstance(found, CorrelationFilter):
        described = {"type": "correlation", "properties": dict(found.properties)}
        described |= {name: getattr(found, name) for name in _CORRELATION_ATTRIBUTES}
    else:
        described = {"type": "false" if isinstance(found, FalseFilter) else "true"}
    action = None if rule.action is None else rule.action.expression
    return {"name": rule.name, "filter": described, "action": action}


def rule_from_json(document: Mapping[str, Any]) -> Rule:
    described = document["filter"]
    found: Filter
    if described["type"] == "sql":
        found = SqlFilter.parse(described["expression"], described["parameters"])
    elif described["type"] == "correlation":
        fields = {name: described[name] for name in _CORRELATION_ATTRIBUTES}
        found = CorrelationFilter(properties=described["properties"], **fields)
    else:
        found = FalseFilter() if described["type"] == "false" else TrueFilter()
    action = document["action"]
    return Rule(document["name"], found, None if action is None else SqlRuleAction.parse(action))


def replay(broker: Broker, changes: Iterable[Mapping[str, Any]]) -> None:
    """Apply stored changes in order, without storing them again. A change whose topic or
    subscription no longer exists (deleted after it) is skipped."""
    with broker.store.replaying():
        for change in changes:
            kind, deleted = change["kind"], change.get("deleted", False)
            if kind == "queue":
                if not deleted:
                    broker.put_queue(change["name"], settings_from_json(QueueSettings, change["settings"]))
                elif change["name"].lower() in broker.queues:
                    broker.delete_queue(change["name"])
            elif kind == "topic":
                if not deleted:
                    broker.put_topic(change["name"], settings_from_json(TopicSettings, change["settings"]))
                elif change["name"].lower() in broker.topics:
                    broker.delete_topic(change["name"])
            elif change["topic"].lower() not in broker.topics:
                continue
            elif kind == "subscription":
                exists = broker.subscription(change["topic"], change["name"]) is not None
                if not deleted:
                    settings = settings_from_json(QueueSettings, change["settings"])
                    broker.put_subscription(change["topic"], change["name"], settings, ())
                elif exists:
                    broker.delete_subscription(change["topic"], change["name"])
            elif broker.subscription(change["topic"], change["subscription"]) is not None:
                if not deleted:
                    broker.put_rule(change["topic"], change["subscription"], rule_from_json(change["rule"]))
                else:
                    broker.delete_rule(change["topic"], change["subscription"], change["name"])
