"""Validation of a topology before any resource is declared: names, durations, ranges, rules, bindings."""

from __future__ import annotations

import re
from datetime import timedelta

import isodate
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.settings import ACTIVE_TAG_VALUE

from infra.topology.spec import LifecycleSpec, SubscriptionSpec, Topology, TopologyError, minimum_expiry_days


def parse_iso_duration(value: str, where: str) -> timedelta:
    """A strictly positive ISO-8601 duration without months or years (their length varies)."""
    try:
        parsed = isodate.parse_duration(value)
    except (isodate.ISO8601Error, TypeError, ValueError):
        raise TopologyError(
            f"{where}: {value!r} is not an ISO-8601 duration such as 'PT1M' or 'P14D'"
        ) from None
    if not isinstance(parsed, timedelta):
        raise TopologyError(f"{where}: {value!r} uses months or years; use days, e.g. 'P30D'")
    if parsed <= timedelta(0):
        raise TopologyError(f"{where}: {value!r} must be longer than zero")
    return parsed


# Azure naming rules, per entity type (learn.microsoft.com: "Naming rules and restrictions for Azure
# resources", Microsoft.ServiceBus and Microsoft.Storage).
_QUEUE_OR_TOPIC = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,258}[A-Za-z0-9])?$")
_SUBSCRIPTION_OR_RULE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?$")
_CONTAINER = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$")
_TABLE = re.compile(r"^[A-Za-z][A-Za-z0-9]{2,62}$")
_TAG_NAME = re.compile(r"^[A-Za-z0-9 +\-.:=_/]{1,128}$")

NAME_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "queue": (
        _QUEUE_OR_TOPIC,
        "1-260 letters, digits, '.', '-', '_' or '/', starting and ending with a letter or digit",
    ),
    "topic": (
        _QUEUE_OR_TOPIC,
        "1-260 letters, digits, '.', '-', '_' or '/', starting and ending with a letter or digit",
    ),
    "subscription": (
        _SUBSCRIPTION_OR_RULE,
        "1-50 letters, digits, '.', '-' or '_', starting and ending with a letter or digit",
    ),
    "rule": (
        _SUBSCRIPTION_OR_RULE,
        "1-50 letters, digits, '.', '-' or '_', starting and ending with a letter or digit",
    ),
    "container": (
        _CONTAINER,
        "3-63 lower-case letters, digits or single hyphens, starting and ending with a letter or digit",
    ),
    "table": (_TABLE, "3-63 letters or digits, starting with a letter"),
}


def check_name(kind: str, name: object, where: str) -> str:
    pattern, rule = NAME_RULES[kind]
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise TopologyError(f"{where}: {kind} name {name!r} is invalid: {rule}")
    if kind == "table" and name.lower() == "tables":
        raise TopologyError(f"{where}: 'tables' is a reserved table name")
    return name


# Ranges of the real service (Service Bus quotas and entity properties).
LOCK_DURATION_RANGE = (timedelta(seconds=5), timedelta(minutes=5))
DUPLICATE_WINDOW_RANGE = (timedelta(seconds=20), timedelta(days=7))


def validate_topology(topology: Topology) -> Topology:
    """Check names, durations, ranges, rules and bindings; returns the topology unchanged if valid."""
    _unique(
        [queue.name for queue in topology.queues] + [topic.name for topic in topology.topics],
        "queue/topic",
        "topology",
    )
    for queue in topology.queues:
        where = f"queue {queue.name!r}"
        check_name("queue", queue.name, "topology.queues")
        _check_entity_timings(
            where, queue.lock_duration, queue.default_message_time_to_live, queue.max_delivery_count
        )
        _check_window(where, queue.duplicate_detection_history_time_window)
    for topic in topology.topics:
        where = f"topic {topic.name!r}"
        check_name("topic", topic.name, "topology.topics")
        parse_iso_duration(topic.default_message_time_to_live, f"{where}.defaultMessageTimeToLive")
        _check_window(where, topic.duplicate_detection_history_time_window)
        _unique([sub.name for sub in topic.subscriptions], "subscription", where)
        for subscription in topic.subscriptions:
            _check_subscription(topic.name, subscription)
    _unique(list(topology.containers), "container", "topology.containers")
    for container in topology.containers:
        check_name("container", container, "topology.containers")
    _unique([name.lower() for name in topology.tables.all()], "table", "topology.tables")
    for table in topology.tables.all():
        check_name("table", table, "topology.tables")
    _check_lifecycle(topology.lifecycle)
    _check_bindings(topology)
    return topology


def _unique(names: list[str], kind: str, where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TopologyError(f"{where}: duplicate {kind} name {name!r}")
        seen.add(name)


def _check_entity_timings(where: str, lock: str, ttl: str, max_delivery_count: int) -> None:
    lock_value = parse_iso_duration(lock, f"{where}.lockDuration")
    low, high = LOCK_DURATION_RANGE
    if not low <= lock_value <= high:
        raise TopologyError(f"{where}.lockDuration: {lock!r} must be between PT5S and PT5M")
    parse_iso_duration(ttl, f"{where}.defaultMessageTimeToLive")
    if (
        isinstance(max_delivery_count, bool)
        or not isinstance(max_delivery_count, int)
        or max_delivery_count < 1
    ):
        raise TopologyError(f"{where}.maxDeliveryCount: {max_delivery_count!r} must be a whole number >= 1")


def _check_window(where: str, window: str) -> None:
    value = parse_iso_duration(window, f"{where}.duplicateDetectionHistoryTimeWindow")
    low, high = DUPLICATE_WINDOW_RANGE
    if not low <= value <= high:
        raise TopologyError(
            f"{where}.duplicateDetectionHistoryTimeWindow: {window!r} must be between PT20S and P7D"
        )


def _check_subscription(topic: str, subscription: SubscriptionSpec) -> None:
    where = f"subscription {topic}/{subscription.name}"
    check_name("subscription", subscription.name, f"topic {topic!r}.subscriptions")
    _check_entity_timings(
        where,
        subscription.lock_duration,
        subscription.default_message_time_to_live,
        subscription.max_delivery_count,
    )
    _unique([rule.name for rule in subscription.rules], "rule", where)
    for rule in subscription.rules:
        rule_where = f"rule {topic}/{subscription.name}/{rule.name}"
        check_name("rule", rule.name, where)
        if rule.name.startswith("$"):
            raise TopologyError(f"{rule_where}: names starting with '$' are reserved by Service Bus")
        has_sql = rule.sql_filter is not None
        has_correlation = rule.correlation_filter is not None
        if has_sql == has_correlation:
            raise TopologyError(f"{rule_where}: give exactly one of sqlFilter or correlationFilter")
        if has_sql and not (rule.sql_filter or "").strip():
            raise TopologyError(
                f"{rule_where}: sqlFilter is empty; write a condition such as \"priority = 'high'\""
            )
        if rule.correlation_filter is not None and rule.correlation_filter.is_empty():
            raise TopologyError(
                f"{rule_where}: correlationFilter matches nothing specific; set a "
                "system property or at least one application property"
            )
        if rule.action is not None and not rule.action.strip():
            raise TopologyError(
                f"{rule_where}: action is empty; omit it or write e.g. \"SET sys.Label = 'urgent'\""
            )


def _check_lifecycle(lifecycle: LifecycleSpec) -> None:
    where = "topology.lifecycle"
    days = {
        "provisionalGraceDays": lifecycle.provisional_grace_days,
        "coolAfterDays": lifecycle.cool_after_days,
        "coldAfterDays": lifecycle.cold_after_days,
        "deleteAfterDays": lifecycle.delete_after_days,
        "oldVersionsDeleteAfterDays": lifecycle.old_versions_delete_after_days,
    }
    for key, value in days.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 99999:
            raise TopologyError(f"{where}.{key}: {value!r} must be a whole number of days, 1-99999")
    if not lifecycle.cool_after_days < lifecycle.cold_after_days < lifecycle.delete_after_days:
        raise TopologyError(
            f"{where}: coolAfterDays < coldAfterDays < deleteAfterDays is required, got "
            f"{lifecycle.cool_after_days}, {lifecycle.cold_after_days}, "
            f"{lifecycle.delete_after_days}"
        )
    earliest, purpose = minimum_expiry_days()
    if lifecycle.delete_after_days < earliest:
        raise TopologyError(
            f"{where}.deleteAfterDays: {lifecycle.delete_after_days} would delete payloads "
            f"before purpose {purpose!r} ends their retention and the reconciler writes the "
            f"deletion proof; expected at least {earliest} (longest retention + a "
            "7-day margin)"
        )
    if lifecycle.provisional_tag_value == ACTIVE_TAG_VALUE:
        raise TopologyError(
            f"{where}.provisionalTagValue: {ACTIVE_TAG_VALUE!r} is the value an object "
            "gets once its publish is confirmed; choose another"
        )
    tags = {
        "provisionalTagName": lifecycle.provisional_tag_name,
        "provisionalTagValue": lifecycle.provisional_tag_value,
    }
    for key, tag in tags.items():
        if not _TAG_NAME.fullmatch(tag):
            raise TopologyError(f"{where}.{key}: {tag!r} is not a valid blob index tag")


def _check_bindings(topology: Topology) -> None:
    bindings = topology.bindings
    queue_names = {queue.name for queue in topology.queues}
    if bindings.documents_queue not in queue_names:
        raise TopologyError(
            f"topology.bindings.documentsQueue: queue {bindings.documents_queue!r} is not "
            f"in the spec (queues: {sorted(queue_names)})"
        )
    topic_names = {topic.name for topic in topology.topics}
    if bindings.results_topic not in topic_names:
        raise TopologyError(
            f"topology.bindings.resultsTopic: topic {bindings.results_topic!r} is not in "
            f"the spec (topics: {sorted(topic_names)})"
        )
    if bindings.payload_container not in topology.containers:
        raise TopologyError(
            f"topology.bindings.payloadContainer: container {bindings.payload_container!r}"
            f" is not in the spec (containers: {list(topology.containers)})"
        )
    where = "topology.bindings.purposeContainers"
    for purpose, container in bindings.purpose_containers.items():
        if purpose not in DEFAULT_PURPOSES:
            raise TopologyError(
                f"{where}: {purpose!r} is not a purpose of the purpose table ({sorted(DEFAULT_PURPOSES)})"
            )
        if container not in topology.containers:
            raise TopologyError(
                f"{where}.{purpose}: container {container!r} is not in the spec "
                f"(containers: {list(topology.containers)})"
            )
