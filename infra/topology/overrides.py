"""Stack config (the `claimcheck:topology` object, camelCase keys) laid over the default topology.

Queues, topics and subscriptions merge by name: a known name overrides only the fields it gives, a new
name adds an entity. A subscription that gives `rules` replaces its rule list (a rule set is not
merged rule by rule). Containers are added to the defaults. Unknown keys and wrong types are errors
naming the path (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from infra.topology.spec import (
    Bindings,
    CorrelationFilterSpec,
    LifecycleSpec,
    QueueSpec,
    RuleSpec,
    SubscriptionSpec,
    TableNames,
    TopicSpec,
    Topology,
    TopologyError,
)

_Section = TypeVar("_Section", TableNames, LifecycleSpec, Bindings)

# camelCase config key -> (dataclass field, expected type)
FieldTable = dict[str, tuple[str, type]]

_QUEUE_FIELDS: FieldTable = {
    "requiresSession": ("requires_session", bool),
    "maxDeliveryCount": ("max_delivery_count", int),
    "lockDuration": ("lock_duration", str),
    "defaultMessageTimeToLive": ("default_message_time_to_live", str),
    "deadLetteringOnMessageExpiration": ("dead_lettering_on_message_expiration", bool),
    "requiresDuplicateDetection": ("requires_duplicate_detection", bool),
    "duplicateDetectionHistoryTimeWindow": ("duplicate_detection_history_time_window", str),
}
_TOPIC_FIELDS: FieldTable = {
    "defaultMessageTimeToLive": ("default_message_time_to_live", str),
    "requiresDuplicateDetection": ("requires_duplicate_detection", bool),
    "duplicateDetectionHistoryTimeWindow": ("duplicate_detection_history_time_window", str),
}
_SUBSCRIPTION_FIELDS: FieldTable = {
    "requiresSession": ("requires_session", bool),
    "maxDeliveryCount": ("max_delivery_count", int),
    "lockDuration": ("lock_duration", str),
    "defaultMessageTimeToLive": ("default_message_time_to_live", str),
    "deadLetteringOnMessageExpiration": ("dead_lettering_on_message_expiration", bool),
    "deadLetteringOnFilterEvaluationExceptions": ("dead_lettering_on_filter_evaluation_exceptions", bool),
}
_CORRELATION_FIELDS: FieldTable = {
    "correlationId": ("correlation_id", str),
    "messageId": ("message_id", str),
    "to": ("to", str),
    "replyTo": ("reply_to", str),
    "label": ("label", str),
    "sessionId": ("session_id", str),
    "replyToSessionId": ("reply_to_session_id", str),
    "contentType": ("content_type", str),
}
_TABLE_FIELDS: FieldTable = {
    "registry": ("registry", str),
    "idempotency": ("idempotency", str),
    "workItems": ("work_items", str),
    "audit": ("audit", str),
    "results": ("results", str),
}
_LIFECYCLE_FIELDS: FieldTable = {
    "provisionalTagName": ("provisional_tag_name", str),
    "provisionalTagValue": ("provisional_tag_value", str),
    "provisionalGraceDays": ("provisional_grace_days", int),
    "coolAfterDays": ("cool_after_days", int),
    "coldAfterDays": ("cold_after_days", int),
    "deleteAfterDays": ("delete_after_days", int),
    "oldVersionsDeleteAfterDays": ("old_versions_delete_after_days", int),
}
_BINDING_FIELDS: FieldTable = {
    "documentsQueue": ("documents_queue", str),
    "resultsTopic": ("results_topic", str),
    "payloadContainer": ("payload_container", str),
    "purposeContainers": ("purpose_containers", dict),
}
_TOP_LEVEL_KEYS = ("queues", "topics", "containers", "tables", "lifecycle", "bindings")


def apply_overrides(base: Topology, config: Mapping[str, Any]) -> Topology:
    where = "topology"
    _mapping(config, where)
    _reject_unknown(config, _TOP_LEVEL_KEYS, where)
    return Topology(
        queues=_merge_queues(base.queues, config.get("queues", []), f"{where}.queues"),
        topics=_merge_topics(base.topics, config.get("topics", []), f"{where}.topics"),
        containers=_merge_containers(base.containers, config.get("containers", []), f"{where}.containers"),
        tables=_replace(base.tables, config.get("tables", {}), _TABLE_FIELDS, f"{where}.tables"),
        lifecycle=_replace(
            base.lifecycle, config.get("lifecycle", {}), _LIFECYCLE_FIELDS, f"{where}.lifecycle"
        ),
        bindings=_replace(base.bindings, config.get("bindings", {}), _BINDING_FIELDS, f"{where}.bindings"),
    )


def _merge_queues(base: tuple[QueueSpec, ...], raw: object, where: str) -> tuple[QueueSpec, ...]:
    queues = {queue.name: queue for queue in base}
    for index, entry in enumerate(_list(raw, where)):
        entry_where = f"{where}[{index}]"
        name = _name(entry, entry_where)
        _reject_unknown(entry, ("name", *_QUEUE_FIELDS), entry_where)
        fields = _fields(entry, _QUEUE_FIELDS, entry_where)
        queues[name] = (
            dataclasses.replace(queues[name], **fields) if name in queues else QueueSpec(name=name, **fields)
        )
    return tuple(queues.values())


def _merge_topics(base: tuple[TopicSpec, ...], raw: object, where: str) -> tuple[TopicSpec, ...]:
    topics = {topic.name: topic for topic in base}
    for index, entry in enumerate(_list(raw, where)):
        entry_where = f"{where}[{index}]"
        name = _name(entry, entry_where)
        _reject_unknown(entry, ("name", "subscriptions", *_TOPIC_FIELDS), entry_where)
        topic = topics.get(name, TopicSpec(name=name))
        subscriptions = _merge_subscriptions(
            topic.subscriptions, entry.get("subscriptions", []), f"{entry_where}.subscriptions"
        )
        topics[name] = dataclasses.replace(
            topic, subscriptions=subscriptions, **_fields(entry, _TOPIC_FIELDS, entry_where)
        )
    return tuple(topics.values())


def _merge_subscriptions(
    base: tuple[SubscriptionSpec, ...], raw: object, where: str
) -> tuple[SubscriptionSpec, ...]:
    subscriptions = {subscription.name: subscription for subscription in base}
    for index, entry in enumerate(_list(raw, where)):
        entry_where = f"{where}[{index}]"
        name = _name(entry, entry_where)
        _reject_unknown(entry, ("name", "rules", *_SUBSCRIPTION_FIELDS), entry_where)
        fields: dict[str, Any] = _fields(entry, _SUBSCRIPTION_FIELDS, entry_where)
        if "rules" in entry:
            fields["rules"] = tuple(
                _rule(rule, f"{entry_where}.rules[{position}]")
                for position, rule in enumerate(_list(entry["rules"], f"{entry_where}.rules"))
            )
        subscriptions[name] = (
            dataclasses.replace(subscriptions[name], **fields)
            if name in subscriptions
            else SubscriptionSpec(name=name, **fields)
        )
    return tuple(subscriptions.values())


def _rule(raw: object, where: str) -> RuleSpec:
    entry = _mapping(raw, where)
    _reject_unknown(entry, ("name", "sqlFilter", "correlationFilter", "action"), where)
    correlation = None
    if "correlationFilter" in entry:
        correlation = _correlation_filter(entry["correlationFilter"], f"{where}.correlationFilter")
    return RuleSpec(
        name=_name(entry, where),
        sql_filter=_optional_str(entry, "sqlFilter", where),
        correlation_filter=correlation,
        action=_optional_str(entry, "action", where),
    )


def _correlation_filter(raw: object, where: str) -> CorrelationFilterSpec:
    entry = _mapping(raw, where)
    _reject_unknown(entry, ("properties", *_CORRELATION_FIELDS), where)
    properties = _mapping(entry.get("properties", {}), f"{where}.properties")
    for key, value in properties.items():
        if not isinstance(value, str | int | float | bool):
            raise TopologyError(f"{where}.properties.{key}: {value!r} must be a string, number or boolean")
    return CorrelationFilterSpec(properties=dict(properties), **_fields(entry, _CORRELATION_FIELDS, where))


def _merge_containers(base: tuple[str, ...], raw: object, where: str) -> tuple[str, ...]:
    containers = list(base)
    for index, name in enumerate(_list(raw, where)):
        if not isinstance(name, str):
            raise TopologyError(f"{where}[{index}]: {name!r} must be a container name (a string)")
        if name not in containers:
            containers.append(name)
    return tuple(containers)


def _replace(base: _Section, raw: object, table: FieldTable, where: str) -> _Section:
    entry = _mapping(raw, where)
    _reject_unknown(entry, tuple(table), where)
    return dataclasses.replace(base, **_fields(entry, table, where))


def _fields(entry: Mapping[str, Any], table: FieldTable, where: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, (attribute, expected) in table.items():
        if key not in entry:
            continue
        value = entry[key]
        # bool is an int in Python; a count given as `true` is a mistake, not 1.
        wrong_bool = expected is int and isinstance(value, bool)
        if wrong_bool or not isinstance(value, expected):
            raise TopologyError(f"{where}.{key}: {value!r} must be {_TYPE_NAMES[expected]}")
        if isinstance(value, dict) and not all(isinstance(item, str) for item in (*value, *value.values())):
            raise TopologyError(f"{where}.{key}: {value!r} must map names to names (strings)")
        fields[attribute] = value
    return fields


_TYPE_NAMES = {bool: "true or false", int: "a whole number", str: "a string", dict: "a mapping"}


def _name(entry: object, where: str) -> str:
    mapping = _mapping(entry, where)
    name = mapping.get("name")
    if not isinstance(name, str) or not name:
        raise TopologyError(f"{where}.name: every entry needs a non-empty string name, got {name!r}")
    return name


def _optional_str(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise TopologyError(f"{where}.{key}: {value!r} must be a string")
    return value


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise TopologyError(f"{where}: expected a mapping of keys to values, got {type(raw).__name__}")
    return raw


def _list(raw: object, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise TopologyError(f"{where}: expected a list, got {type(raw).__name__}")
    return raw


def _reject_unknown(entry: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise TopologyError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
