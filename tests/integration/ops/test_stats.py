"""`stats` on a fresh emulator: counts obtained by browsing the entities of its Config.json."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.integration.ops.bus import dead_letter_from_queue, dead_letter_from_replays, publish
from tests.integration.ops.cli import run_ops
from tests.integration.ops.emulator import running_emulator


def test_stats_counts_active_and_dead_lettered_messages_per_entity(tmp_path: Path) -> None:
    """stats reports active, dead-letter and scheduled counts for every queue and subscription."""
    with running_emulator(tmp_path) as (connection, config):
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

        result = run_ops("stats", "--config", str(config), "--json", "--connection-string", connection)
        missing_config = run_ops("stats", "--connection-string", connection)

    assert result.exit_code == 0, result.output
    counts = {row["entity"]: row for row in json.loads(result.stdout)}
    assert set(counts) == {"documents", "results/subscriptions/audit", "results/subscriptions/replays"}
    documents = counts["documents"]
    assert (documents["active"], documents["dead_letter"], documents["scheduled"]) == (1, 1, 1)
    # audit got the two published messages and the one sent for `replays`.
    assert (
        counts["results/subscriptions/audit"]["active"],
        counts["results/subscriptions/audit"]["dead_letter"],
    ) == (3, 0)
    assert (
        counts["results/subscriptions/replays"]["active"],
        counts["results/subscriptions/replays"]["dead_letter"],
    ) == (0, 1)
    assert counts["results/subscriptions/audit"]["scheduled"] == 0
    assert missing_config.exit_code == 1
    assert "--config" in missing_config.stderr
