"""Topics with SQL and correlation rules, duplicate detection, TTL, scheduling, forwarding, counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusQuotaExceededError
from servicebus_emulator import RunningEmulator


def _subscription_bodies(client: ServiceBusClient, subscription: str) -> list[str]:
    bodies = []
    with client.get_subscription_receiver("results", subscription, max_wait_time=1) as receiver:
        while messages := receiver.receive_messages(max_message_count=10, max_wait_time=1):
            for message in messages:
                bodies.append(str(message))
                receiver.complete_message(message)
    return sorted(bodies)


def test_topic_routes_copies_only_to_matching_subscriptions(client: ServiceBusClient) -> None:
    """Each subscription gets exactly the messages its SQL or correlation rule matches; audit gets all."""
    with client.get_topic_sender("results") as sender:
        sender.send_messages(
            [
                ServiceBusMessage("high", application_properties={"priority": "high"}),
                ServiceBusMessage("low", application_properties={"priority": "low"}),
                ServiceBusMessage("contract", application_properties={"document_type": "contract"}),
                ServiceBusMessage("invoice", application_properties={"document_type": "invoice"}),
                ServiceBusMessage("needs-review", application_properties={"review_required": True}),
            ]
        )
    assert _subscription_bodies(client, "audit") == ["contract", "high", "invoice", "low", "needs-review"]
    assert _subscription_bodies(client, "notifications") == ["high"]
    assert _subscription_bodies(client, "contracts") == ["contract"]
    assert _subscription_bodies(client, "review") == ["needs-review"]


def test_rule_action_changes_the_subscription_copy_only(client: ServiceBusClient) -> None:
    """The notifications rule's action sets the label on its copy; the audit copy keeps the original."""
    with client.get_topic_sender("results") as sender:
        sender.send_messages(
            ServiceBusMessage("alert", subject="plain", application_properties={"priority": "high"})
        )
    with client.get_subscription_receiver("results", "notifications", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert message.subject == "urgent"
    with client.get_subscription_receiver("results", "audit", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert message.subject == "plain"


def test_subscription_dead_letter_queue(client: ServiceBusClient) -> None:
    """A subscription has its own dead-letter queue."""
    with client.get_topic_sender("results") as sender:
        sender.send_messages(ServiceBusMessage("bad result"))
    with client.get_subscription_receiver("results", "audit", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="Unprocessable", error_description="bad")
    with client.get_subscription_receiver(
        "results", "audit", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
    ) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(dead), dead.dead_letter_reason) == ("bad result", "Unprocessable")


def test_duplicate_detection_drops_repeated_message_id(
    client: ServiceBusClient, emulator: RunningEmulator
) -> None:
    """Within the window, a second message with the same message_id is accepted but not enqueued."""
    with client.get_queue_sender("dedup") as sender:
        sender.send_messages(ServiceBusMessage("first", message_id="work-1:v1"))
        sender.send_messages(ServiceBusMessage("again", message_id="work-1:v1"))
        sender.send_messages(ServiceBusMessage("other", message_id="work-2:v1"))
    assert emulator.runtime_properties("dedup")["active_message_count"] == 2
    with client.get_queue_receiver("dedup", max_wait_time=5) as receiver:
        assert sorted(str(m) for m in receiver.receive_messages(max_message_count=5, max_wait_time=2)) == [
            "first",
            "other",
        ]


def test_topic_duplicate_detection(client: ServiceBusClient) -> None:
    """A topic with duplicate detection fans a repeated message id out only once."""
    with client.get_topic_sender("results") as sender:
        for _ in range(3):
            sender.send_messages(ServiceBusMessage("once", message_id="result-1"))
    assert _subscription_bodies(client, "audit") == ["once"]


def test_ttl_expiry_dead_letters(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """With dead-lettering on expiration, an expired message lands in the DLQ as TTLExpiredException."""
    with client.get_queue_sender("expiring") as sender:
        sender.send_messages(ServiceBusMessage("stale"))
    time.sleep(1.5)
    with client.get_queue_receiver("expiring", max_wait_time=1) as receiver:
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
    with client.get_queue_receiver(
        "expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
    ) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(dead), dead.dead_letter_reason) == ("stale", "TTLExpiredException")


def test_ttl_expiry_drops_without_dead_lettering(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """Without dead-lettering on expiry an expired message simply disappears; a shorter message TTL wins."""
    with client.get_queue_sender("expiring-drop") as sender:
        sender.send_messages(ServiceBusMessage("gone"))
    with client.get_queue_sender("work") as sender:
        sender.send_messages(ServiceBusMessage("short-lived", time_to_live=timedelta(seconds=1)))
    time.sleep(1.6)
    assert emulator.runtime_properties("expiring-drop")["active_message_count"] == 0
    assert emulator.runtime_properties("expiring-drop")["dead_letter_message_count"] == 0
    assert emulator.runtime_properties("work")["active_message_count"] == 0


def test_schedule_and_cancel(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """A scheduled message stays invisible until its time; a cancelled one never arrives."""
    with client.get_queue_sender("work") as sender:
        at = datetime.now(UTC) + timedelta(seconds=4)
        keep, cancel = sender.schedule_messages(
            [ServiceBusMessage("due"), ServiceBusMessage("cancelled")], at
        )
        sender.cancel_scheduled_messages(cancel)
    assert emulator.runtime_properties("work")["scheduled_message_count"] == 1
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=5)
        assert peeked.sequence_number == keep
        assert peeked.scheduled_enqueue_time_utc is not None
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "due"
        receiver.complete_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_scheduled_enqueue_time_on_send(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """scheduled_enqueue_time_utc on a plain send delays the message the same way, on a topic too."""
    at = datetime.now(UTC) + timedelta(seconds=1)
    with client.get_topic_sender("results") as sender:
        sender.send_messages(ServiceBusMessage("later", scheduled_enqueue_time_utc=at))
        assert emulator.runtime_properties("results/Subscriptions/audit")["active_message_count"] == 0
    time.sleep(1.2)
    assert _subscription_bodies(client, "audit") == ["later"]


def test_forward_to(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """A message sent to a queue with ForwardTo ends up in the target queue."""
    with client.get_queue_sender("inbox") as sender:
        sender.send_messages(ServiceBusMessage("forwarded"))
    assert emulator.runtime_properties("inbox")["active_message_count"] == 0
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "forwarded"


def test_runtime_properties_report_counts_and_age(
    client: ServiceBusClient, emulator: RunningEmulator
) -> None:
    """runtime_properties gives active/dead-letter counts and the age of the oldest active message."""
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    time.sleep(0.3)
    counts = emulator.runtime_properties("work")
    assert counts["active_message_count"] == 2
    assert counts["dead_letter_message_count"] == 0
    assert counts["oldest_message_age_seconds"] >= 0.3


def test_unknown_receiver_entity_is_not_found(client: ServiceBusClient) -> None:
    """Receiving from a subscription that does not exist raises MessagingEntityNotFoundError."""
    with (
        pytest.raises(MessagingEntityNotFoundError),
        client.get_subscription_receiver("results", "missing", max_wait_time=2) as receiver,
    ):
        receiver.receive_messages(max_message_count=1, max_wait_time=1)


def test_entity_quota_refuses_with_quota_exceeded(start: Callable[..., RunningEmulator]) -> None:
    """With a per-entity message quota, the send that would exceed it raises ServiceBusQuotaExceededError."""
    emulator = start(max_messages_per_entity=2)
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender("work") as sender,
    ):
        sender.send_messages([ServiceBusMessage("1"), ServiceBusMessage("2")])
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage("3"))
    assert emulator.runtime_properties("work")["active_message_count"] == 2


def test_session_subscription(client: ServiceBusClient) -> None:
    """A session-enabled subscription delivers per session; a copy without session id is dead-lettered."""
    with client.get_topic_sender("results") as sender:
        sender.send_messages([ServiceBusMessage("s1", session_id="item-1"), ServiceBusMessage("no session")])
    with client.get_subscription_receiver(
        "results", "per-item", session_id="item-1", max_wait_time=5
    ) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(message), message.session_id) == ("s1", "item-1")
        receiver.complete_message(message)
    with client.get_subscription_receiver(
        "results", "per-item", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
    ) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(dead), dead.dead_letter_reason) == ("no session", "Session id is null.")
