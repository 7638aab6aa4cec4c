"""`stats` through the administration client, against a fresh emulator's management plane."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient
from servicebus_emulator import DEFAULT_KEY, connection_string

from infra.topology import load_topology
from local.ports import free_port
from scripts.ops_servicebus import BusTarget
from scripts.ops_stats import management_connection_string
from tests.integration.ops.bus import dead_letter_from_queue, dead_letter_from_replays, publish
from tests.integration.ops.cli import run_ops
from tests.integration.ops.emulator import running_emulator, write_stack_outputs


def _no_namespace_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's entity-scoped roles cannot list the namespace: any listing call fails the test."""

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("stats listed the namespace")

    for method in (
        "list_queues",
        "list_topics",
        "list_subscriptions",
        "list_queues_runtime_properties",
        "list_topics_runtime_properties",
        "list_subscriptions_runtime_properties",
    ):
        monkeypatch.setattr(ServiceBusAdministrationClient, method, refused)


def test_stats_counts_active_and_dead_lettered_messages_per_entity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stats reads exact active, dead-letter and scheduled counts of each queue and subscription the
    stack outputs name, one by name (no namespace listing); a named entity the namespace lacks is
    reported, not fatal."""
    with running_emulator(tmp_path) as emulator:
        connection = emulator.connection
        dead_letter_from_queue(connection, session_id=f"wi-{uuid.uuid4().hex[:8]}")
        publish(connection, session_id=f"wi-{uuid.uuid4().hex[:8]}")
        dead_letter_from_replays(connection)
        publish(connection)
        publish(connection)
        with (
            ServiceBusClient.from_connection_string(connection) as client,
            client.get_queue_sender("documents") as sender,
        ):
            later = ServiceBusMessage(b"later", session_id="wi-later")
            sender.schedule_messages(later, datetime.now(UTC) + timedelta(hours=1))

        _no_namespace_listing(monkeypatch)
        outputs = write_stack_outputs(tmp_path, extra_queues=("archive",))
        result = run_ops(
            "stats", "--json", "--connection-string", connection, "--stack-outputs", str(outputs),
            env={"CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION": emulator.management},
        )  # fmt: skip

    assert result.exit_code == 0, result.output
    counts = {
        row["entity"]: (row["active"], row["dead_letter"], row["scheduled"], row["detail"])
        for row in json.loads(result.stdout)
    }
    # The session queue is counted too; audit got the two published messages and the one for `replays`.
    assert counts == {
        "documents": (1, 1, 1, "queue"),
        "archive": (None, None, None, "queue not found"),
        "results/subscriptions/audit": (3, 0, None, "subscription"),
        "results/subscriptions/replays": (0, 1, None, "subscription"),
    }


def test_stats_without_outputs_reads_the_default_topology(tmp_path: Path) -> None:
    """No --stack-outputs: the repository's default topology names the entities (its four
    subscriptions; the test emulator has two of them)."""
    with running_emulator(tmp_path) as emulator:
        result = run_ops(
            "stats", "--json", "--connection-string", emulator.connection,
            env={"CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION": emulator.management},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    details = {row["entity"]: row["detail"] for row in json.loads(result.stdout)}
    topology = load_topology()
    assert set(details) == {queue.name for queue in topology.queues} | {
        f"{topic.name}/subscriptions/{sub.name}" for topic in topology.topics for sub in topic.subscriptions
    }
    assert details["results/subscriptions/audit"] == "subscription"
    assert details["results/subscriptions/review"] == "subscription not found"


def test_the_emulators_management_endpoint_follows_microsofts_layout() -> None:
    """AMQP on 5672 means management on 5300; another AMQP port needs the management string given."""
    default = BusTarget(connection_string=connection_string(5672, DEFAULT_KEY))
    assert management_connection_string(default, None) == connection_string(5300, DEFAULT_KEY)
    azure = BusTarget(
        connection_string="Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
    )
    assert management_connection_string(azure, None) == azure.connection_string

    elsewhere = connection_string(free_port(), DEFAULT_KEY)
    result = run_ops("stats", "--connection-string", elsewhere)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: the emulator's management plane has its own port"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

    unreachable = run_ops(
        "stats", "--connection-string", elsewhere,
        "--management-connection-string", connection_string(free_port(), DEFAULT_KEY),
    )  # fmt: skip
    assert unreachable.exit_code == 1
    assert unreachable.stderr.startswith("error: cannot reach the Service Bus management endpoint"), (
        unreachable.stderr
    )
    assert len(unreachable.stderr.strip().splitlines()) == 1
