"""The typed topology spec (frozen dataclasses) and the default topology of docs/architecture.md §2."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from claimcheck.policy import DEFAULT_PURPOSES, CleanupPolicy, PurposePolicy
from claimcheck.settings import (
    AUDIT_TABLE,
    DEFAULT_PURPOSE_CONTAINERS,
    DOCUMENTS_QUEUE,
    EVIDENCE_CONTAINER,
    IDEMPOTENCY_TABLE,
    PAYLOAD_CONTAINER,
    PROVISIONAL_TAG_NAME,
    PROVISIONAL_TAG_VALUE,
    REGISTRY_TABLE,
    RESULTS_TABLE,
    RESULTS_TOPIC,
    WORK_ITEMS_TABLE,
)

PropertyValue = str | int | float | bool


class TopologyError(ValueError):
    """The topology spec (defaults plus stack config) is invalid; the message names the entry."""


@dataclass(frozen=True)
class CorrelationFilterSpec:
    """Equality match on system properties and application properties (all must match)."""

    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    label: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)

    def is_empty(self) -> bool:
        system = (
            self.correlation_id,
            self.message_id,
            self.to,
            self.reply_to,
            self.label,
            self.session_id,
            self.reply_to_session_id,
            self.content_type,
        )
        return all(value is None for value in system) and not self.properties


@dataclass(frozen=True)
class RuleSpec:
    """A subscription rule: exactly one of a SQL filter or a correlation filter, optional SQL action."""

    name: str
    sql_filter: str | None = None
    correlation_filter: CorrelationFilterSpec | None = None
    action: str | None = None


@dataclass(frozen=True)
class QueueSpec:
    name: str
    requires_session: bool = False
    max_delivery_count: int = 10
    lock_duration: str = "PT1M"
    default_message_time_to_live: str = "P14D"
    dead_lettering_on_message_expiration: bool = True
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: str = "PT10M"


@dataclass(frozen=True)
class SubscriptionSpec:
    """A topic subscription. No rules means Azure's `$Default` TrueFilter (receives everything)."""

    name: str
    rules: tuple[RuleSpec, ...] = ()
    requires_session: bool = False
    max_delivery_count: int = 10
    lock_duration: str = "PT1M"
    default_message_time_to_live: str = "P14D"
    dead_lettering_on_message_expiration: bool = True
    dead_lettering_on_filter_evaluation_exceptions: bool = True


@dataclass(frozen=True)
class TopicSpec:
    name: str
    subscriptions: tuple[SubscriptionSpec, ...] = ()
    default_message_time_to_live: str = "P14D"
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: str = "PT10M"


@dataclass(frozen=True)
class TableNames:
    registry: str = REGISTRY_TABLE
    idempotency: str = IDEMPOTENCY_TABLE
    work_items: str = WORK_ITEMS_TABLE
    audit: str = AUDIT_TABLE
    results: str = RESULTS_TABLE

    def all(self) -> tuple[str, ...]:
        return (self.registry, self.idempotency, self.work_items, self.audit, self.results)


# Days the lifecycle expiry waits beyond the longest purpose retention: the reconciler's sweep deletes a
# retained object (and writes its deletion proof) when its retention ends; this margin leaves it a week
# of sweeps, outages included, before the backstop could delete the object without proof.
RETENTION_MARGIN_DAYS = 7


def minimum_expiry_days(purposes: Mapping[str, PurposePolicy] = DEFAULT_PURPOSES) -> tuple[int, str]:
    """The earliest day the lifecycle rule may delete a payload, and the purpose that sets it: the
    longest retention of any purpose (all of them share the payload container) plus the margin."""
    # On a tie, name a purpose that retains its objects (the one whose proof is at stake).
    longest = max(
        purposes.values(), key=lambda policy: (policy.retention, policy.cleanup == CleanupPolicy.RETAIN)
    )
    return math.ceil(longest.retention / timedelta(days=1)) + RETENTION_MARGIN_DAYS, longest.name


@dataclass(frozen=True)
class LifecycleSpec:
    """Blob lifecycle backstop (docs/architecture.md §4: cleanup is explicit; these rules only catch
    leftovers).

    Azure lifecycle rules count in whole days, hence days rather than durations.
    """

    # The blob index tag the producer writes on an object until its publish is confirmed.
    provisional_tag_name: str = PROVISIONAL_TAG_NAME
    provisional_tag_value: str = PROVISIONAL_TAG_VALUE
    provisional_grace_days: int = 1
    cool_after_days: int = 7
    cold_after_days: int = 30
    delete_after_days: int = 90
    old_versions_delete_after_days: int = 30


def _default_purpose_containers() -> Mapping[str, str]:
    """evidence-archive in its own container, which a production stack puts under a WORM policy."""
    return dict(DEFAULT_PURPOSE_CONTAINERS)


@dataclass(frozen=True)
class Bindings:
    """Which entities the Function App uses: the trigger queue, the results topic, the container, and
    the purposes whose payloads go to a container of their own (claimcheck.routing)."""

    documents_queue: str = DOCUMENTS_QUEUE
    results_topic: str = RESULTS_TOPIC
    payload_container: str = PAYLOAD_CONTAINER
    purpose_containers: Mapping[str, str] = field(default_factory=_default_purpose_containers)

    def container_for(self, purpose: str) -> str:
        return self.purpose_containers.get(purpose, self.payload_container)

    def payload_containers(self) -> tuple[str, ...]:
        """Every container that holds payloads, the shared one first."""
        return tuple(dict.fromkeys((self.payload_container, *self.purpose_containers.values())))


@dataclass(frozen=True)
class Topology:
    queues: tuple[QueueSpec, ...]
    topics: tuple[TopicSpec, ...]
    containers: tuple[str, ...]
    tables: TableNames
    lifecycle: LifecycleSpec
    bindings: Bindings

    def queue(self, name: str) -> QueueSpec:
        for queue in self.queues:
            if queue.name == name:
                return queue
        raise TopologyError(f"no queue {name!r} in the topology (queues: {[q.name for q in self.queues]})")

    def topic(self, name: str) -> TopicSpec:
        for topic in self.topics:
            if topic.name == name:
                return topic
        raise TopologyError(f"no topic {name!r} in the topology (topics: {[t.name for t in self.topics]})")


def default_topology() -> Topology:
    """docs/architecture.md §2: session queue `documents`, topic `results` with four subscriptions,
    `payloads`."""
    return Topology(
        queues=(
            QueueSpec(
                name=DOCUMENTS_QUEUE,
                requires_session=True,
                max_delivery_count=5,
                lock_duration="PT1M",
                dead_lettering_on_message_expiration=True,
                requires_duplicate_detection=True,
            ),
        ),
        topics=(
            TopicSpec(
                name=RESULTS_TOPIC,
                requires_duplicate_detection=True,
                subscriptions=(
                    SubscriptionSpec(name="audit"),
                    SubscriptionSpec(
                        name="notifications",
                        rules=(RuleSpec(name="high-priority", sql_filter="priority = 'high'"),),
                    ),
                    SubscriptionSpec(
                        name="review",
                        rules=(RuleSpec(name="review-required", sql_filter="review_required = TRUE"),),
                    ),
                    SubscriptionSpec(
                        name="contracts",
                        rules=(
                            RuleSpec(
                                name="contract-documents",
                                correlation_filter=CorrelationFilterSpec(
                                    properties={"document_type": "contract"}
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        containers=(PAYLOAD_CONTAINER, EVIDENCE_CONTAINER),
        tables=TableNames(),
        lifecycle=LifecycleSpec(),
        bindings=Bindings(),
    )
