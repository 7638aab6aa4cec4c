"""Config.json validation: a bad entry is refused with an error that names it."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from local.servicebus.config import ConfigError, parse_config

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
