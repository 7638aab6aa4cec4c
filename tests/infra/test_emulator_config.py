"""The Service Bus emulator Config.json generator (interface A)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import isodate
import pytest
from servicebus_emulator.config import parse_config

from infra.emulator_config import (
    DOCKER_LIMITS,
    EmulatorConfigError,
    build_emulator_config,
    write_emulator_config,
)
from infra.stack_config import REPO_ROOT
from infra.topology import load_topology


def _namespace(document: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = document["UserConfig"]["Namespaces"][0]
    return namespace


def test_unclamped_document_has_interface_a_shape() -> None:
    """Without clamping, the document carries the spec's real values in interface A's schema."""
    document = build_emulator_config(load_topology(), clamp=False)
    assert document["UserConfig"]["Logging"] == {"Type": "File"}
    namespace = _namespace(document)
    assert namespace["Name"] == "sbemulatorns"
    (queue,) = namespace["Queues"]
    assert queue == {
        "Name": "documents",
        "Properties": {
            "DeadLetteringOnMessageExpiration": True,
            "DefaultMessageTimeToLive": "P14D",
            "DuplicateDetectionHistoryTimeWindow": "PT10M",
            "ForwardDeadLetteredMessagesTo": "",
            "ForwardTo": "",
            "LockDuration": "PT1M",
            "MaxDeliveryCount": 5,
            "RequiresDuplicateDetection": True,
            "RequiresSession": True,
        },
    }
    (topic,) = namespace["Topics"]
    assert topic["Properties"] == {
        "DefaultMessageTimeToLive": "P14D",
        "DuplicateDetectionHistoryTimeWindow": "PT10M",
        "RequiresDuplicateDetection": True,
    }
    subscriptions = {sub["Name"]: sub for sub in topic["Subscriptions"]}
    assert "Rules" not in subscriptions["audit"]
    assert set(subscriptions["audit"]["Properties"]) == {
        "DeadLetteringOnMessageExpiration",
        "DefaultMessageTimeToLive",
        "LockDuration",
        "MaxDeliveryCount",
        "ForwardDeadLetteredMessagesTo",
        "ForwardTo",
        "RequiresSession",
    }
    assert subscriptions["notifications"]["Rules"] == [
        {
            "Name": "high-priority",
            "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "priority = 'high'"}},
        }
    ]
    (contract_rule,) = subscriptions["contracts"]["Rules"]
    correlation = contract_rule["Properties"]["CorrelationFilter"]
    assert contract_rule["Properties"]["FilterType"] == "Correlation"
    assert correlation["Properties"] == {"document_type": "contract"}
    assert correlation["Label"] == ""
    assert correlation["CorrelationId"] == ""


def test_sql_action_is_written_when_present() -> None:
    """A rule's optional SQL action appears as Properties.Action.SqlExpression."""
    rule_config = {
        "name": "high-priority",
        "sqlFilter": "priority = 'high'",
        "action": "SET sys.Label = 'urgent'",
    }
    topology = load_topology(
        {
            "topics": [
                {"name": "results", "subscriptions": [{"name": "notifications", "rules": [rule_config]}]}
            ]
        }
    )
    namespace = _namespace(build_emulator_config(topology, clamp=False))
    rule = namespace["Topics"][0]["Subscriptions"][1]["Rules"][0]
    assert rule["Properties"]["Action"] == {"SqlExpression": "SET sys.Label = 'urgent'"}


def test_clamping_moves_values_into_docker_ranges_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """Out-of-range values are clamped to the Docker emulator's bounds and each clamp prints a warning."""
    topology = load_topology(
        {"queues": [{"name": "documents", "lockDuration": "PT5S", "maxDeliveryCount": 50}]}
    )
    namespace = _namespace(build_emulator_config(topology))
    queue = namespace["Queues"][0]["Properties"]
    assert queue["DefaultMessageTimeToLive"] == "PT1H"
    assert queue["DuplicateDetectionHistoryTimeWindow"] == "PT5M"
    assert queue["LockDuration"] == "PT5S"
    assert queue["MaxDeliveryCount"] == 10
    warnings = capsys.readouterr().err
    assert "warning: queue 'documents'.MaxDeliveryCount: 50" in warnings
    assert "warning: queue 'documents'.DefaultMessageTimeToLive: P14D" in warnings
    assert "LockDuration" not in warnings.split("subscription")[0]


def test_clamped_document_is_within_every_docker_range() -> None:
    """Every duration and count in a clamped document lies in the Docker emulator's ranges."""
    topology = load_topology(
        {"topics": [{"name": "results", "subscriptions": [{"name": "audit", "lockDuration": "PT10S"}]}]}
    )
    namespace = _namespace(build_emulator_config(topology, warn=lambda message: None))
    subscription = namespace["Topics"][0]["Subscriptions"][0]["Properties"]
    assert subscription["LockDuration"] == "PT1M"
    for entity in [*namespace["Queues"], *namespace["Topics"], *namespace["Topics"][0]["Subscriptions"]]:
        ttl = isodate.parse_duration(entity["Properties"]["DefaultMessageTimeToLive"])
        assert DOCKER_LIMITS.message_ttl.low <= ttl <= DOCKER_LIMITS.message_ttl.high


def test_counts_beyond_docker_limits_are_refused() -> None:
    """A topic without subscriptions cannot be clamped into the Docker schema: a clear error."""
    topology = load_topology({"topics": [{"name": "lonely"}]})
    with pytest.raises(EmulatorConfigError, match="'lonely'"):
        build_emulator_config(topology)
    assert _namespace(build_emulator_config(topology, clamp=False))["Topics"][1]["Subscriptions"] == []


def test_written_file_round_trips(tmp_path: Path) -> None:
    """The written file is JSON equal to the built document, in a created folder."""
    target = write_emulator_config(load_topology(), tmp_path / "nested" / "Config.json", clamp=False)
    expected = build_emulator_config(load_topology(), clamp=False)
    assert json.loads(target.read_text(encoding="utf-8")) == expected


def test_cli_reads_the_stack_file(tmp_path: Path) -> None:
    """`python -m infra.emulator_config --stack dev` writes the dev stack's topology."""
    out = tmp_path / "Config.json"
    completed = subprocess.run(
        [sys.executable, "-m", "infra.emulator_config", "--out", str(out), "--stack", "dev", "--no-clamp"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    namespace = _namespace(json.loads(out.read_text(encoding="utf-8")))
    assert [queue["Name"] for queue in namespace["Queues"]] == ["documents"]
    assert completed.stderr == ""


@pytest.mark.parametrize("clamp", [False, True])
def test_embedded_emulator_reads_the_generated_config(clamp: bool) -> None:
    """Round trip: our emulator's Config.json parser accepts the document and sees the spec's entities."""
    rule_config = {
        "name": "high-priority",
        "sqlFilter": "priority = 'high'",
        "action": "SET sys.Label = 'urgent'",
    }
    topology = load_topology(
        {
            "topics": [
                {"name": "results", "subscriptions": [{"name": "notifications", "rules": [rule_config]}]}
            ]
        }
    )
    namespace = parse_config(build_emulator_config(topology, clamp=clamp, warn=lambda message: None))
    documents = namespace.queues["documents"]
    assert documents.requires_session
    assert documents.max_delivery_count == 5
    assert documents.lock_duration == timedelta(minutes=1)
    assert documents.default_ttl == (timedelta(hours=1) if clamp else timedelta(days=14))
    (results,) = namespace.topics
    rules = {sub.name: sub.rules for sub in results.subscriptions}
    assert [rule.name for rule in rules["audit"]] == ["$Default"]
    assert [rule.name for rule in rules["notifications"]] == ["high-priority"]
    assert rules["notifications"][0].action is not None
    assert [rule.name for rule in rules["contracts"]] == ["contract-documents"]


def test_cli_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    """An unknown stack is a one-line error naming the missing file, exit status 2, nothing written."""
    out = tmp_path / "Config.json"
    completed = subprocess.run(
        [sys.executable, "-m", "infra.emulator_config", "--out", str(out), "--stack", "nope"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith("error: no stack file Pulumi.nope.yaml")
    assert "Traceback" not in completed.stderr
    assert not out.exists()
