"""The reconciler's dead-letter counts through the management plane, with the real SDKs: exact counts
from runtime properties (ServiceBusAdministrationClient, the path `claimcheck-ops stats` uses) and the
oldest message's age from a peek of the dead-letter subqueue, on the emulator as on Azure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from claimcheck.adapters.busadmin import ServiceBusDeadLetters
from claimcheck.deadletters import dead_letter_alerts
from servicebus_emulator import RunningEmulator

from tests.integration.servicebus.support import stock_admin_client


def test_counts_and_oldest_age_per_entity_with_an_alert_past_the_age(
    emulator: RunningEmulator, client: ServiceBusClient
) -> None:
    """Two dead-lettered messages on a queue are counted with the first one's enqueue time; an empty
    subscription counts 0 with no age; only the entity past the alert age gets an alert line."""
    before = datetime.now(UTC) - timedelta(seconds=5)
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage(b"first"), ServiceBusMessage(b"second")])
    with client.get_queue_receiver("work", max_wait_time=10) as receiver:
        received: list[ServiceBusReceivedMessage] = []
        while len(received) < 2:
            received += receiver.receive_messages(max_message_count=2, max_wait_time=10)
        for message in received:
            receiver.dead_letter_message(message, reason="test", error_description="on purpose")
    with stock_admin_client(emulator) as admin:
        counts = ServiceBusDeadLetters(
            admin, client, queues=["work", "dedup"], subscriptions=[("results", "audit")]
        ).dead_letter_counts()
    by_entity = {found.entity: found for found in counts}
    assert set(by_entity) == {"work", "dedup", "results/audit"}
    work = by_entity["work"]
    assert work.count == 2
    assert work.oldest_enqueued_at is not None
    assert before <= work.oldest_enqueued_at <= datetime.now(UTC) + timedelta(seconds=5)
    assert (by_entity["dedup"].count, by_entity["dedup"].oldest_enqueued_at) == (0, None)
    assert (by_entity["results/audit"].count, by_entity["results/audit"].oldest_enqueued_at) == (0, None)
    max_age = timedelta(hours=1)
    assert dead_letter_alerts(counts, datetime.now(UTC), max_age) == []  # fresh: no alert yet
    later = work.oldest_enqueued_at + timedelta(hours=2)
    (alert,) = dead_letter_alerts(counts, later, max_age)
    assert alert.startswith("work: 2 dead-lettered message(s), the oldest 7200 s old (alert past 3600 s)")
