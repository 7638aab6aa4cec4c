"""Config.json validation: a bad entry is refused with an error that names it."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from servicebus_emulator.config import ConfigError, parse_config
from servicebus_emulator.sql.message import FilterMessage

BASE: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {
                        "Name": "documents",
                        "Properties": {
                            "DeadLetteringOnMessageExpiration": True,
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "ForwardDeadLetteredMessagesTo": "",
                            "ForwardTo": "",
                            "LockDuration": "PT1M",
                            "MaxDeliveryCount": 5,
                            "RequiresDuplicateDetection": True,
                            "RequiresSession": True,
                        },
                    }
                ],
                "Topics": [
                    {
                        "Name": "results",
                        "Properties": {"DefaultMessageTimeToLive": "PT1H"},
                        "Subscriptions": [
                            {"Name": "audit"},
                            {
                                "Name": "notifications",
                                "Properties": {"LockDuration": "PT5S", "MaxDeliveryCount": 2},
                                "Rules": [
                                    {
                                        "Name": "high",
                                        "Properties": {
                                            "FilterType": "Sql",
                                            "SqlFilter": {"SqlExpression": "priority = 'high'"},
                                            "Action": {"SqlExpression": "SET sys.Label = 'urgent'"},
                                        },
                                    },
                                    {
                                        "Name": "contracts",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {
                                                "ContentType": "",
                                                "Label": "",
                                                "Properties": {"document_type": "contract"},
                                            },
                                        },
                                    },
                                ],
                            },
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def _with(change: Any) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    change(document["UserConfig"]["Namespaces"][0])
    return document


def test_the_interface_a_example_is_accepted() -> None:
    """The agreed Config.json shape parses into typed settings, with $Default for rule-less subscriptions."""
    config = parse_config(BASE)
    documents = config.queues["documents"]
    assert documents.requires_session
    assert documents.max_delivery_count == 5
    assert documents.lock_duration == timedelta(minutes=1)
    assert documents.default_ttl == timedelta(hours=1)
    assert documents.forward_to is None
    (topic,) = config.topics
    audit, notifications = topic.subscriptions
    assert [rule.name for rule in audit.rules] == ["$Default"]
    assert [rule.name for rule in notifications.rules] == ["high", "contracts"]
    assert notifications.settings.lock_duration == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda ns: ns["Queues"][0]["Properties"].update(LockDurationX="PT1M"),
            r"Queues\[documents\]\.Properties: unknown property LockDurationX",
        ),
        (
            lambda ns: ns["Queues"][0]["Properties"].update(LockDuration="one minute"),
            r"Queues\[documents\]\.Properties\.LockDuration: 'one minute' is not an ISO-8601 duration",
        ),
        (
            lambda ns: ns["Queues"][0]["Properties"].update(LockDuration="PT10M"),
            r"LockDuration: PT10M is out of range",
        ),
        (
            lambda ns: ns["Queues"][0]["Properties"].update(MaxDeliveryCount=0),
            r"MaxDeliveryCount: expected an integer",
        ),
        (
            lambda ns: ns["Queues"][0]["Properties"].update(RequiresSession="yes"),
            r"RequiresSession: expected true",
        ),
        (
            lambda ns: ns["Queues"][0]["Properties"].update(ForwardTo="nowhere"),
            r"documents\.ForwardTo names 'nowhere'",
        ),
        (lambda ns: ns["Queues"].append({"Name": "DOCUMENTS"}), r"duplicate name 'DOCUMENTS'"),
        (lambda ns: ns["Topics"].append({"Name": "Documents"}), r"duplicate name 'Documents'"),
        (
            lambda ns: ns["Topics"][0]["Subscriptions"].append({"Name": "Audit"}),
            r"Subscriptions: duplicate name 'Audit'",
        ),
        (
            lambda ns: ns["Topics"][0]["Subscriptions"][1]["Rules"][0]["Properties"]["SqlFilter"].update(
                SqlExpression="priority = = 'high'"
            ),
            r"Subscriptions\[notifications\]\.Rules\[high\]",
        ),
        (
            lambda ns: ns["Topics"][0]["Subscriptions"][1]["Rules"][0]["Properties"].update(Extra=1),
            r"Rules\[high\]\.Properties: unknown property Extra",
        ),
        (lambda ns: ns["Topics"][0].update(Partitioned=True), r"Topics\[0\]: unknown property Partitioned"),
        (lambda ns: ns["Queues"][0].update(Name=""), r"Queues\[0\]\.Name: expected a non-empty entity name"),
    ],
)
def test_bad_entries_are_refused_by_name(change: Any, message: str) -> None:
    """Each kind of mistake raises ConfigError whose message names the entry and the problem."""
    with pytest.raises(ConfigError, match=message):
        parse_config(_with(change))


def test_short_locks_and_ttls_are_legal() -> None:
    """Azure accepts a lock or TTL of a few seconds (the Docker emulator's narrower limits do not apply)."""
    config = parse_config(
        _with(
            lambda ns: ns["Queues"][0]["Properties"].update(
                LockDuration="PT2S", DefaultMessageTimeToLive="PT3S"
            )
        )
    )
    assert config.queues["documents"].lock_duration == timedelta(seconds=2)
    assert config.queues["documents"].default_ttl == timedelta(seconds=3)


def test_unreadable_file_is_a_config_error(tmp_path: Any) -> None:
    """A missing or non-JSON file is reported as a ConfigError naming the path."""
    broken = tmp_path / "Config.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read config"):
        parse_config(broken)


def test_missing_properties_take_the_docker_emulators_defaults() -> None:
    """A bare queue, topic and subscription get Microsoft's emulator defaults (Config-schema.json)."""
    bare = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": "q"}],
                    "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s"}]}],
                }
            ]
        }
    }
    config = parse_config(bare)
    queue = config.queues["q"]
    subscription = config.topics[0].subscriptions[0].settings
    for settings in (queue, subscription):
        assert settings.lock_duration == timedelta(minutes=1)
        assert settings.max_delivery_count == 3
        assert settings.default_ttl == timedelta(hours=1)
        assert not settings.requires_session
        assert not settings.dead_lettering_on_expiration
    assert queue.duplicate_window == timedelta(seconds=20)
    assert config.topics[0].settings.default_ttl == timedelta(hours=1)
    assert config.topics[0].settings.duplicate_window == timedelta(seconds=20)


@pytest.mark.parametrize("rules", [None, []], ids=["missing", "empty"])
def test_a_subscription_without_rules_gets_the_default_rule(rules: list[Any] | None) -> None:
    """Missing or empty `Rules` both mean the $Default rule (1=1), as in the Docker emulator and Azure."""
    document = copy.deepcopy(BASE)
    audit = document["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]
    if rules is not None:
        audit["Rules"] = rules
    (rule,) = parse_config(document).topics[0].subscriptions[0].rules
    assert rule.name == "$Default"
    assert rule.evaluate(FilterMessage()) is not None


def test_rules_that_are_not_a_list_are_refused() -> None:
    document = copy.deepcopy(BASE)
    document["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]["Rules"] = {}
    with pytest.raises(ConfigError, match=r"Subscriptions\[audit\]\.Rules: expected a list"):
        parse_config(document)
