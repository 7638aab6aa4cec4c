"""`stats` on a fresh emulator: exact counts read from its store for the entities of its Config.json."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from local.ports import free_port
from local.servicebus import DEFAULT_KEY, connection_string
from tests.integration.ops.bus import dead_letter_from_queue, dead_letter_from_replays, publish
from tests.integration.ops.cli import run_ops
from tests.integration.ops.emulator import running_emulator, write_config


def test_stats_counts_active_and_dead_lettered_messages_per_entity(tmp_path: Path) -> None:
    """stats reports exact active, dead-letter and scheduled counts for every queue and subscription."""
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

        result = run_ops(
            "stats", "--config", str(emulator.config), "--json", "--connection-string", connection,
            env={"CLAIMCHECK_SERVICEBUS_DATA": str(emulator.data)},
        )  # fmt: skip

    assert result.exit_code == 0, result.output
    counts = {
        row["entity"]: (row["active"], row["dead_letter"], row["scheduled"])
        for row in json.loads(result.stdout)
    }
    # The session queue is counted too; audit got the two published messages and the one for `replays`.
    assert counts == {
        "documents": (1, 1, 1),
        "results/subscriptions/audit": (3, 0, 0),
        "results/subscriptions/replays": (0, 1, 0),
    }
    ages = {row["entity"]: row["oldest_age_s"] for row in json.loads(result.stdout)}
    assert ages["results/subscriptions/replays"] is None
    assert ages["results/subscriptions/audit"] >= 0


def test_stats_on_the_emulator_says_which_option_is_missing(tmp_path: Path) -> None:
    """Without --config or --emulator-data, or with a data dir holding no store, stats names the problem."""
    # Each check fails before any connection is made, so no emulator needs to run.
    emulator_connection = connection_string(free_port(), DEFAULT_KEY)
    config = write_config(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()

    no_config = run_ops("stats", "--emulator-data", str(empty), "--connection-string", emulator_connection)
    no_data = run_ops("stats", "--config", str(config), "--connection-string", emulator_connection)
    no_store = run_ops(
        "stats", "--config", str(config), "--emulator-data", str(empty),
        "--connection-string", emulator_connection,
    )  # fmt: skip

    for result in (no_config, no_data, no_store):
        assert result.exit_code == 1
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert no_config.stderr.startswith("error: stats on the emulator needs --config PATH")
    assert "--emulator-data" not in no_config.stderr
    assert no_data.stderr.startswith("error: stats on the emulator needs --emulator-data DIR")
    assert no_store.stderr.startswith(f"error: no emulator store in {empty}")
