"""Config.json (Microsoft's Service Bus emulator schema) -> validated entity settings.

Anything the emulator would silently ignore is refused instead, naming the entry: an unknown
property, a bad duration, a duplicate name (names are case-insensitive, as in Azure), an invalid
SQL filter, a forward target that does not exist. Ranges are the real service's, not the Docker
emulator's narrower ones, so tests can use locks and TTLs of a few seconds.

A missing property takes the default of Microsoft's emulator (its Config-schema.json): lock PT1M,
MaxDeliveryCount 3, message TTL PT1H, duplicate-detection window PT20S, flags false. A
subscription without rules, or with an empty ``Rules`` list, gets the ``$Default`` rule (1=1) that
the Docker emulator and Azure create, so it receives every message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import isodate

from servicebus_emulator import filters


class ConfigError(ValueError):
    """The configuration cannot be served; the message names the entry and the problem."""


@dataclass(frozen=True)
class QueueSettings:
    """Settings shared by queues and subscriptions (the parts that hold messages)."""

    lock_duration: timedelta = timedelta(minutes=1)
    max_delivery_count: int = 10
    default_ttl: timedelta | None = None
    dead_lettering_on_expiration: bool = False
    requires_session: bool = False
    requires_duplicate_detection: bool = False
    duplicate_window: timedelta = timedelta(minutes=10)
    forward_to: str | None = None
    forward_dead_lettered_to: str | None = None
    # A queue's own message size limit (Premium's MaxMessageSizeInKilobytes); None: the namespace's.
    max_message_size_kb: int | None = None


@dataclass(frozen=True)
class TopicSettings:
    default_ttl: timedelta | None = None
    requires_duplicate_detection: bool = False
    duplicate_window: timedelta = timedelta(minutes=10)
    max_message_size_kb: int | None = None


@dataclass(frozen=True)
class SubscriptionConfig:
    name: str
    settings: QueueSettings
    rules: tuple[filters.Rule, ...]


@dataclass(frozen=True)
class TopicConfig:
    name: str
    settings: TopicSettings
    subscriptions: tuple[SubscriptionConfig, ...]


@dataclass(frozen=True)
class NamespaceConfig:
    name: str
    queues: dict[str, QueueSettings] = field(default_factory=dict)
    topics: tuple[TopicConfig, ...] = ()


_QUEUE_KEYS = {
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "LockDuration",
    "MaxDeliveryCount",
    "RequiresDuplicateDetection",
    "RequiresSession",
}
_SUBSCRIPTION_KEYS = {
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "LockDuration",
    "MaxDeliveryCount",
    "RequiresSession",
}
_TOPIC_KEYS = {
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "RequiresDuplicateDetection",
}
# The real service's limits (Azure Service Bus quotas), not the Docker emulator's.
_LOCK_RANGE = (timedelta(seconds=1), timedelta(minutes=5))
# From 5 s (the Docker emulator's minimum; Azure's is 20 s) so every Docker config loads.
_DUPLICATE_WINDOW_RANGE = (timedelta(seconds=5), timedelta(days=7))
_MIN_TTL = timedelta(seconds=1)
# Defaults of a property Config.json leaves out: Microsoft's emulator's (Config-schema.json).
DEFAULT_LOCK = timedelta(minutes=1)
DEFAULT_MAX_DELIVERY_COUNT = 3
DEFAULT_TTL = timedelta(hours=1)
DEFAULT_DUPLICATE_WINDOW = timedelta(seconds=20)


def _object(value: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown property {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )
    missing = sorted(required - set(value))
    if missing:
        raise ConfigError(f"{where}: missing property {', '.join(missing)}")
    return value


def _duration(
    props: dict[str, Any],
    key: str,
    where: str,
    default: timedelta | None,
    bounds: tuple[timedelta, timedelta | None],
) -> timedelta | None:
    if key not in props:
        return default
    text = props[key]
    try:
        value = isodate.parse_duration(text) if isinstance(text, str) else None
    except (isodate.ISO8601Error, ValueError):
        value = None
    if not isinstance(value, timedelta):
        raise ConfigError(f"{where}.{key}: {text!r} is not an ISO-8601 duration such as PT30S or P14D")
    low, high = bounds
    if value < low or (high is not None and value > high):
        limit = f"between {low} and {high}" if high else f"at least {low}"
        raise ConfigError(f"{where}.{key}: {text} is out of range (must be {limit})")
    return value


def _flag(props: dict[str, Any], key: str, where: str) -> bool:
    value = props.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def _target(props: dict[str, Any], key: str, where: str) -> str | None:
    value = props.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected an entity name, got {value!r}")
    return value or None


def _name(entry: dict[str, Any], where: str) -> str:
    name = entry.get("Name")
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"{where}.Name: expected a non-empty entity name without '/', got {name!r}")
    return name


def _queue_settings(props: dict[str, Any], where: str, *, subscription: bool) -> QueueSettings:
    _object(props, where, _SUBSCRIPTION_KEYS if subscription else _QUEUE_KEYS)
    max_delivery = props.get("MaxDeliveryCount", DEFAULT_MAX_DELIVERY_COUNT)
    if not isinstance(max_delivery, int) or isinstance(max_delivery, bool) or max_delivery < 1:
        raise ConfigError(f"{where}.MaxDeliveryCount: expected an integer >= 1, got {max_delivery!r}")
    return QueueSettings(
        lock_duration=_duration(props, "LockDuration", where, DEFAULT_LOCK, _LOCK_RANGE) or DEFAULT_LOCK,
        max_delivery_count=max_delivery,
        default_ttl=_duration(props, "DefaultMessageTimeToLive", where, DEFAULT_TTL, (_MIN_TTL, None)),
        dead_lettering_on_expiration=_flag(props, "DeadLetteringOnMessageExpiration", where),
        requires_session=_flag(props, "RequiresSession", where),
        requires_duplicate_detection=_flag(props, "RequiresDuplicateDetection", where),
        duplicate_window=_duration(
            props,
            "DuplicateDetectionHistoryTimeWindow",
            where,
            DEFAULT_DUPLICATE_WINDOW,
            _DUPLICATE_WINDOW_RANGE,
        )
        or DEFAULT_DUPLICATE_WINDOW,
        forward_to=_target(props, "ForwardTo", where),
        forward_dead_lettered_to=_target(props, "ForwardDeadLetteredMessagesTo", where),
    )


def _rule(entry: Any, where: str) -> filters.Rule:
    entry = _object(entry, where, {"Name", "Properties"}, {"Name", "Properties"})
    where = f"{where}[{_name(entry, where)}]"
    _object(
        entry["Properties"],
        f"{where}.Properties",
        {"FilterType", "SqlFilter", "CorrelationFilter", "Action"},
        {"FilterType"},
    )
    try:
        return filters.rule_from_config(entry)
    except filters.FilterError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise ConfigError(f"{where}: duplicate name {name!r} (entity names are case-insensitive)")
        seen.add(name.lower())


def _topic(entry: Any, where: str) -> TopicConfig:
    entry = _object(entry, where, {"Name", "Properties", "Subscriptions"}, {"Name"})
    name = _name(entry, where)
    where = f"{where}[{name}]"
    props = _object(entry.get("Properties", {}), f"{where}.Properties", _TOPIC_KEYS)
    settings = TopicSettings(
        default_ttl=_duration(
            props, "DefaultMessageTimeToLive", f"{where}.Properties", DEFAULT_TTL, (_MIN_TTL, None)
        ),
        requires_duplicate_detection=_flag(props, "RequiresDuplicateDetection", f"{where}.Properties"),
        duplicate_window=_duration(
            props,
            "DuplicateDetectionHistoryTimeWindow",
            f"{where}.Properties",
            DEFAULT_DUPLICATE_WINDOW,
            _DUPLICATE_WINDOW_RANGE,
        )
        or DEFAULT_DUPLICATE_WINDOW,
    )
    subscriptions = []
    for index, sub in enumerate(entry.get("Subscriptions", [])):
        sub_where = f"{where}.Subscriptions[{index}]"
        sub = _object(sub, sub_where, {"Name", "Properties", "Rules"}, {"Name"})
        sub_name = _name(sub, sub_where)
        sub_where = f"{where}.Subscriptions[{sub_name}]"
        sub_settings = _queue_settings(
            sub.get("Properties", {}), f"{sub_where}.Properties", subscription=True
        )
        listed = sub.get("Rules", [])
        if not isinstance(listed, list):
            raise ConfigError(f"{sub_where}.Rules: expected a list of rules, got {type(listed).__name__}")
        rules = tuple(_rule(rule, f"{sub_where}.Rules") for rule in listed)
        _unique([rule.name for rule in rules], f"{sub_where}.Rules")
        if not rules:  # as the Docker emulator and Azure do: a subscription starts with $Default
            rules = (filters.Rule(name="$Default", filter=filters.TrueFilter()),)
        subscriptions.append(SubscriptionConfig(sub_name, sub_settings, rules))
    _unique([sub.name for sub in subscriptions], f"{where}.Subscriptions")
    return TopicConfig(name, settings, tuple(subscriptions))


def parse_config(document: dict[str, Any] | Path | str) -> NamespaceConfig:
    """Validate a Config.json document (a dict, or a path to the file) and return the namespace."""
    if isinstance(document, Path | str):
        try:
            document = json.loads(Path(document).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read config {document}: {exc}") from exc
    root = _object(document, "config", {"UserConfig"}, {"UserConfig"})
    user = _object(root["UserConfig"], "UserConfig", {"Namespaces", "Logging"}, {"Namespaces"})
    namespaces = user["Namespaces"]
    if not isinstance(namespaces, list) or len(namespaces) != 1:
        raise ConfigError("UserConfig.Namespaces: expected exactly one namespace")
    ns = _object(namespaces[0], "UserConfig.Namespaces[0]", {"Name", "Queues", "Topics"}, {"Name"})
    where = f"Namespaces[{_name(ns, 'UserConfig.Namespaces[0]')}]"
    queues: dict[str, QueueSettings] = {}
    names: list[str] = []
    for index, entry in enumerate(ns.get("Queues", [])):
        entry = _object(entry, f"{where}.Queues[{index}]", {"Name", "Properties"}, {"Name"})
        name = _name(entry, f"{where}.Queues[{index}]")
        names.append(name)
        queues[name] = _queue_settings(
            entry.get("Properties", {}), f"{where}.Queues[{name}].Properties", subscription=False
        )
    topics = tuple(
        _topic(entry, f"{where}.Topics[{index}]") for index, entry in enumerate(ns.get("Topics", []))
    )
    _unique(names + [topic.name for topic in topics], f"{where} queues and topics")
    config = NamespaceConfig(ns["Name"], queues, topics)
    _check_forwarding(config, where)
    return config


def _check_forwarding(config: NamespaceConfig, where: str) -> None:
    known = {name.lower() for name in config.queues} | {topic.name.lower() for topic in config.topics}
    owners: list[tuple[str, QueueSettings]] = list(config.queues.items())
    owners += [
        (f"{topic.name}/Subscriptions/{sub.name}", sub.settings)
        for topic in config.topics
        for sub in topic.subscriptions
    ]
    for owner, settings in owners:
        for key, target in (
            ("ForwardTo", settings.forward_to),
            ("ForwardDeadLetteredMessagesTo", settings.forward_dead_lettered_to),
        ):
            if target is not None and target.lower() not in known:
                raise ConfigError(f"{where}: {owner}.{key} names {target!r}, which is not a queue or topic")
            if target is not None and target.lower() == owner.lower():
                raise ConfigError(f"{where}: {owner}.{key} forwards to itself")
