"""The topology spec: docs/architecture.md §2 defaults, stack-config overrides, validation naming the
entry."""

from __future__ import annotations

from typing import Any

import pytest
from claimcheck import settings

from infra.topology import TopologyError, default_topology, load_topology


def test_default_topology_matches_design() -> None:
    """The default spec is the docs/architecture.md §2 topology with the shared names from
    claimcheck.settings."""
    topology = load_topology()
    documents = topology.queue(settings.DOCUMENTS_QUEUE)
    assert documents.requires_session
    assert documents.max_delivery_count == 5
    assert documents.lock_duration == "PT1M"
    assert documents.dead_lettering_on_message_expiration
    assert documents.requires_duplicate_detection
    results = topology.topic(settings.RESULTS_TOPIC)
    assert results.requires_duplicate_detection
    rules = {sub.name: sub.rules for sub in results.subscriptions}
    assert rules["audit"] == ()
    assert rules["notifications"][0].sql_filter == "priority = 'high'"
    assert rules["review"][0].sql_filter == "review_required = TRUE"
    correlation = rules["contracts"][0].correlation_filter
    assert correlation is not None
    assert dict(correlation.properties) == {"document_type": "contract"}
    assert topology.containers == (settings.PAYLOAD_CONTAINER, settings.EVIDENCE_CONTAINER)
    assert dict(topology.bindings.purpose_containers) == {"evidence-archive": settings.EVIDENCE_CONTAINER}
    assert topology.tables.all() == (
        settings.REGISTRY_TABLE,
        settings.IDEMPOTENCY_TABLE,
        settings.WORK_ITEMS_TABLE,
        settings.AUDIT_TABLE,
        settings.RESULTS_TABLE,
    )
    assert (topology.lifecycle.provisional_tag_name, topology.lifecycle.provisional_tag_value) == (
        settings.PROVISIONAL_TAG_NAME,
        settings.PROVISIONAL_TAG_VALUE,
    )


def test_overrides_merge_by_name_and_add_entities() -> None:
    """A known name overrides only given fields; a new name adds an entity with defaults."""
    topology = load_topology(
        {
            "queues": [{"name": "documents", "lockDuration": "PT2M"}, {"name": "reprocess"}],
            "topics": [
                {
                    "name": "results",
                    "subscriptions": [
                        {
                            "name": "escalations",
                            "rules": [
                                {
                                    "name": "urgent",
                                    "sqlFilter": "priority = 'high'",
                                    "action": "SET sys.Label = 'urgent'",
                                }
                            ],
                        },
                        {"name": "notifications", "maxDeliveryCount": 3},
                    ],
                }
            ],
            "containers": ["exports"],
            "lifecycle": {"deleteAfterDays": 365},
        }
    )
    documents = topology.queue("documents")
    assert documents.lock_duration == "PT2M"
    assert documents.requires_session
    assert topology.queue("reprocess").requires_session is False
    subscriptions = {sub.name: sub for sub in topology.topic("results").subscriptions}
    assert subscriptions["escalations"].rules[0].action == "SET sys.Label = 'urgent'"
    assert subscriptions["notifications"].max_delivery_count == 3
    assert subscriptions["notifications"].rules == default_topology().topic("results").subscriptions[1].rules
    assert topology.containers == ("payloads", "evidence", "exports")
    assert topology.lifecycle.delete_after_days == 365


def _results_subscription(**fields: Any) -> dict[str, Any]:
    return {"topics": [{"name": "results", "subscriptions": [{"name": "extra", **fields}]}]}


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"queues": [{"name": "results"}]}, ["duplicate", "'results'"]),
        ({"queues": [{"name": "-bad"}]}, ["queue name", "'-bad'"]),
        ({"queues": [{"name": "x" * 261}]}, ["queue name"]),
        (_results_subscription(name="has/slash"), ["subscription name", "has/slash"]),
        ({"containers": ["Payloads"]}, ["container name", "'Payloads'"]),
        ({"containers": ["a--b"]}, ["container name", "'a--b'"]),
        ({"tables": {"audit": "1audit"}}, ["table name", "'1audit'"]),
        ({"tables": {"audit": "idempotency"}}, ["duplicate table", "idempotency"]),
        (
            {"queues": [{"name": "documents", "lockDuration": "1 minute"}]},
            ["queue 'documents'.lockDuration", "ISO-8601"],
        ),
        (
            {"queues": [{"name": "documents", "lockDuration": "PT10M"}]},
            ["queue 'documents'.lockDuration", "PT5M"],
        ),
        (
            {"queues": [{"name": "documents", "defaultMessageTimeToLive": "P1M"}]},
            ["defaultMessageTimeToLive", "months"],
        ),
        (
            {"queues": [{"name": "documents", "duplicateDetectionHistoryTimeWindow": "PT5S"}]},
            ["duplicateDetectionHistoryTimeWindow", "PT20S"],
        ),
        ({"queues": [{"name": "documents", "maxDeliveryCount": 0}]}, ["maxDeliveryCount"]),
        ({"queues": [{"name": "documents", "maxDeliveryCount": True}]}, ["maxDeliveryCount", "whole number"]),
        ({"queues": [{"name": "documents", "lockduration": "PT1M"}]}, ["unknown key", "lockduration"]),
        (_results_subscription(rules=[{"name": "r"}]), ["rule results/extra/r", "exactly one"]),
        (_results_subscription(rules=[{"name": "r", "sqlFilter": "  "}]), ["results/extra/r", "sqlFilter"]),
        (
            _results_subscription(
                rules=[{"name": "r", "sqlFilter": "a = 1", "correlationFilter": {"label": "x"}}]
            ),
            ["results/extra/r", "exactly one"],
        ),
        (
            _results_subscription(rules=[{"name": "r", "correlationFilter": {}}]),
            ["results/extra/r", "correlationFilter"],
        ),
        (_results_subscription(rules=[{"name": "$Default", "sqlFilter": "1=1"}]), ["rule name", "$Default"]),
        (
            _results_subscription(
                rules=[{"name": "a", "sqlFilter": "1=1"}, {"name": "a", "sqlFilter": "2=2"}]
            ),
            ["duplicate rule", "'a'"],
        ),
        ({"bindings": {"documentsQueue": "missing"}}, ["bindings.documentsQueue", "'missing'"]),
        ({"bindings": {"resultsTopic": "missing"}}, ["bindings.resultsTopic", "'missing'"]),
        ({"bindings": {"payloadContainer": "missing"}}, ["bindings.payloadContainer", "'missing'"]),
        ({"lifecycle": {"coolAfterDays": 40}}, ["lifecycle", "coolAfterDays < coldAfterDays"]),
        ({"lifecycle": {"provisionalGraceDays": 0}}, ["lifecycle.provisionalGraceDays"]),
        ({"queues": {"name": "documents"}}, ["topology.queues", "expected a list"]),
        ({"queues": [{"lockDuration": "PT1M"}]}, ["topology.queues[0].name"]),
        ({"extra": 1}, ["unknown key", "extra"]),
    ],
)
def test_invalid_topology_is_refused_naming_the_entry(config: dict[str, Any], names: list[str]) -> None:
    """Each invalid spec raises TopologyError whose message names the offending entry."""
    with pytest.raises(TopologyError) as raised:
        load_topology(config)
    for name in names:
        assert name in str(raised.value)
