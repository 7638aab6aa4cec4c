"""Writes the Service Bus emulator `Config.json` (interface A) from the topology spec.

Microsoft's Docker emulator accepts narrower ranges than the real service (its Config-schema.json:
message TTL PT5M-PT1H, queue lock PT5S-PT5M, subscription lock PT1M-PT5M, duplicate-detection
window PT5S-PT5M, MaxDeliveryCount 1-10, the single namespace `sbemulatorns`, at most 50 queues
plus topics, 1-50 subscriptions per topic). With `clamp=True` (the default, for Docker) values
outside those ranges are moved to the nearest bound with a printed warning; counts cannot be
clamped without dropping entities, so exceeding them is an error. Our embedded emulator accepts
the service's real ranges: call with `clamp=False`.

CLI: `python -m infra.emulator_config --out PATH [--stack dev] [--no-clamp]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import isodate

from infra.stack_config import StackConfigError, read_stack_config
from infra.topology import (
    CorrelationFilterSpec,
    QueueSpec,
    RuleSpec,
    SubscriptionSpec,
    TopicSpec,
    Topology,
    TopologyError,
    load_topology,
    parse_iso_duration,
)

EMULATOR_NAMESPACE = "sbemulatorns"
MAX_QUEUES_AND_TOPICS = 50
MAX_SUBSCRIPTIONS_PER_TOPIC = 50


class EmulatorConfigError(ValueError):
    """The topology cannot be expressed for the Docker emulator without losing entities."""


@dataclass(frozen=True)
class DurationRange:
    low: timedelta
    high: timedelta


@dataclass(frozen=True)
class DockerEmulatorLimits:
    message_ttl: DurationRange = DurationRange(timedelta(minutes=5), timedelta(hours=1))
    queue_lock: DurationRange = DurationRange(timedelta(seconds=5), timedelta(minutes=5))
    subscription_lock: DurationRange = DurationRange(timedelta(minutes=1), timedelta(minutes=5))
    duplicate_window: DurationRange = DurationRange(timedelta(seconds=5), timedelta(minutes=5))
    max_delivery_count: tuple[int, int] = (1, 10)


DOCKER_LIMITS = DockerEmulatorLimits()

Warn = Callable[[str], None]


def print_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class _Shaper:
    """Formats values for Config.json, clamping to the Docker emulator's ranges when asked."""

    def __init__(self, clamp: bool, warn: Warn) -> None:
        self._clamp = clamp
        self._warn = warn

    def duration(self, value: str, allowed: DurationRange, where: str) -> str:
        parsed = parse_iso_duration(value, where)
        if not self._clamp or allowed.low <= parsed <= allowed.high:
            return value
        bound = allowed.low if parsed < allowed.low else allowed.high
        clamped: str = isodate.duration_isoformat(bound)
        self._warn(
            f"{where}: {value} is outside the Docker emulator's range "
            f"{isodate.duration_isoformat(allowed.low)}-{isodate.duration_isoformat(allowed.high)};"
            f" using {clamped}"
        )
        return clamped

    def count(self, value: int, where: str) -> int:
        low, high = DOCKER_LIMITS.max_delivery_count
        if not self._clamp or low <= value <= high:
            return value
        clamped = min(max(value, low), high)
        self._warn(f"{where}: {value} is outside the Docker emulator's range {low}-{high}; using {clamped}")
        return clamped


def build_emulator_config(
    topology: Topology, *, clamp: bool = True, warn: Warn = print_warning
) -> dict[str, Any]:
    """The Config.json document for `topology` (interface A)."""
    if clamp:
        _check_counts(topology)
    shaper = _Shaper(clamp, warn)
    namespace = {
        "Name": EMULATOR_NAMESPACE,
        "Queues": [_queue(queue, shaper) for queue in topology.queues],
        "Topics": [_topic(topic, shaper) for topic in topology.topics],
    }
    return {"UserConfig": {"Namespaces": [namespace], "Logging": {"Type": "File"}}}


def write_emulator_config(
    topology: Topology, path: Path | str, *, clamp: bool = True, warn: Warn = print_warning
) -> Path:
    """Writes Config.json for `topology` to `path` (parent folders created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = build_emulator_config(topology, clamp=clamp, warn=warn)
    target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return target


def _check_counts(topology: Topology) -> None:
    entities = len(topology.queues) + len(topology.topics)
    if entities > MAX_QUEUES_AND_TOPICS:
        raise EmulatorConfigError(
            f"the Docker emulator accepts at most {MAX_QUEUES_AND_TOPICS} queues plus "
            f"topics; the topology has {entities}"
        )
    for topic in topology.topics:
        if not 1 <= len(topic.subscriptions) <= MAX_SUBSCRIPTIONS_PER_TOPIC:
            raise EmulatorConfigError(
                f"topic {topic.name!r}: the Docker emulator needs 1-"
                f"{MAX_SUBSCRIPTIONS_PER_TOPIC} subscriptions per topic; it has "
                f"{len(topic.subscriptions)}"
            )


def _queue(queue: QueueSpec, shaper: _Shaper) -> dict[str, Any]:
    where = f"queue {queue.name!r}"
    return {
        "Name": queue.name,
        "Properties": {
            "DeadLetteringOnMessageExpiration": queue.dead_lettering_on_message_expiration,
            "DefaultMessageTimeToLive": shaper.duration(
                queue.default_message_time_to_live,
                DOCKER_LIMITS.message_ttl,
                f"{where}.DefaultMessageTimeToLive",
            ),
            "DuplicateDetectionHistoryTimeWindow": shaper.duration(
                queue.duplicate_detection_history_time_window,
                DOCKER_LIMITS.duplicate_window,
                f"{where}.DuplicateDetectionHistoryTimeWindow",
            ),
            "ForwardDeadLetteredMessagesTo": "",
            "ForwardTo": "",
            "LockDuration": shaper.duration(
                queue.lock_duration, DOCKER_LIMITS.queue_lock, f"{where}.LockDuration"
            ),
            "MaxDeliveryCount": shaper.count(queue.max_delivery_count, f"{where}.MaxDeliveryCount"),
            "RequiresDuplicateDetection": queue.requires_duplicate_detection,
            "RequiresSession": queue.requires_session,
        },
    }


def _topic(topic: TopicSpec, shaper: _Shaper) -> dict[str, Any]:
    where = f"topic {topic.name!r}"
    return {
        "Name": topic.name,
        "Properties": {
            "DefaultMessageTimeToLive": shaper.duration(
                topic.default_message_time_to_live,
                DOCKER_LIMITS.message_ttl,
                f"{where}.DefaultMessageTimeToLive",
            ),
            "DuplicateDetectionHistoryTimeWindow": shaper.duration(
                topic.duplicate_detection_history_time_window,
                DOCKER_LIMITS.duplicate_window,
                f"{where}.DuplicateDetectionHistoryTimeWindow",
            ),
            "RequiresDuplicateDetection": topic.requires_duplicate_detection,
        },
        "Subscriptions": [_subscription(topic.name, sub, shaper) for sub in topic.subscriptions],
    }


def _subscription(topic: str, subscription: SubscriptionSpec, shaper: _Shaper) -> dict[str, Any]:
    where = f"subscription {topic}/{subscription.name}"
    document: dict[str, Any] = {
        "Name": subscription.name,
        "Properties": {
            "DeadLetteringOnMessageExpiration": subscription.dead_lettering_on_message_expiration,
            "DefaultMessageTimeToLive": shaper.duration(
                subscription.default_message_time_to_live,
                DOCKER_LIMITS.message_ttl,
                f"{where}.DefaultMessageTimeToLive",
            ),
            "LockDuration": shaper.duration(
                subscription.lock_duration, DOCKER_LIMITS.subscription_lock, f"{where}.LockDuration"
            ),
            "MaxDeliveryCount": shaper.count(subscription.max_delivery_count, f"{where}.MaxDeliveryCount"),
            "ForwardDeadLetteredMessagesTo": "",
            "ForwardTo": "",
            "RequiresSession": subscription.requires_session,
        },
    }
    # No "Rules" means the $Default TrueFilter, as on Azure; explicit rules replace it.
    if subscription.rules:
        document["Rules"] = [_rule(rule) for rule in subscription.rules]
    return document


def _rule(rule: RuleSpec) -> dict[str, Any]:
    properties: dict[str, Any]
    if rule.correlation_filter is not None:
        properties = {
            "FilterType": "Correlation",
            "CorrelationFilter": _correlation_filter(rule.correlation_filter),
        }
    else:
        properties = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": rule.sql_filter}}
    if rule.action is not None:
        properties["Action"] = {"SqlExpression": rule.action}
    return {"Name": rule.name, "Properties": properties}


def _correlation_filter(spec: CorrelationFilterSpec) -> dict[str, Any]:
    document: dict[str, Any] = {
        "ContentType": spec.content_type or "",
        "CorrelationId": spec.correlation_id or "",
        "Label": spec.label or "",
        "MessageId": spec.message_id or "",
        "ReplyTo": spec.reply_to or "",
        "ReplyToSessionId": spec.reply_to_session_id or "",
        "SessionId": spec.session_id or "",
        "To": spec.to or "",
    }
    # The Docker schema requires a non-empty "Properties" object when the key is present.
    if spec.properties:
        document["Properties"] = dict(spec.properties)
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.emulator_config", description="Write the Service Bus emulator Config.json."
    )
    parser.add_argument("--out", required=True, type=Path, help="where to write Config.json")
    parser.add_argument("--stack", help="read the topology from Pulumi.<stack>.yaml (default: built-in)")
    parser.add_argument(
        "--no-clamp", action="store_true", help="keep the service's real ranges (for our embedded emulator)"
    )
    args = parser.parse_args(argv)
    try:
        config = read_stack_config(args.stack) if args.stack else {}
        topology = load_topology(config.get("topology"))
        path = write_emulator_config(topology, args.out, clamp=not args.no_clamp)
    except (StackConfigError, TopologyError, EmulatorConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
