"""Peek-lock settlement: complete, abandon, dead-letter, defer, lock expiry and renewal."""

from __future__ import annotations

import time

import pytest
from azure.servicebus import AutoLockRenewer, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError, ServiceBusError
from servicebus_emulator import RunningEmulator

from tests.integration.servicebus.support import LOCK_SECONDS


def _send(client: ServiceBusClient, queue: str, *bodies: str) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(body) for body in bodies])


def test_abandon_redelivers_with_incremented_delivery_count(client: ServiceBusClient) -> None:
    """An abandoned message comes back at once with delivery_count + 1."""
    _send(client, "work", "retry me")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert first.delivery_count == 0
        receiver.abandon_message(first)
        (second,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(second), second.delivery_count, second.sequence_number) == (
            "retry me",
            1,
            first.sequence_number,
        )
        receiver.complete_message(second)


def test_dead_letter_with_reason_is_readable_from_the_dlq(
    client: ServiceBusClient, emulator: RunningEmulator
) -> None:
    """dead_letter_message(reason, description) moves the message to the DLQ, which shows both."""
    _send(client, "work", "poison")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(
            message, reason="SchemaInvalid", error_description="missing work_item_id"
        )
    assert emulator.runtime_properties("work")["dead_letter_message_count"] == 1
    with client.get_queue_receiver("work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(dead) == "poison"
        assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
            "SchemaInvalid",
            "missing work_item_id",
        )
        assert dead.dead_letter_source == "work"
        dlq.complete_message(dead)
    assert emulator.runtime_properties("work")["dead_letter_message_count"] == 0


def test_max_delivery_count_moves_to_dlq(client: ServiceBusClient) -> None:
    """After MaxDeliveryCount (3) abandons the message is dead-lettered with MaxDeliveryCountExceeded."""
    _send(client, "work", "always fails")
    with client.get_queue_receiver("work", max_wait_time=2) as receiver:
        for _ in range(3):
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.abandon_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
    with client.get_queue_receiver("work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_lock_expiry_redelivers(client: ServiceBusClient) -> None:
    """An expired lock means redelivery; completing the stale copy raises MessageLockLostError."""
    _send(client, "work", "slow consumer")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        time.sleep(LOCK_SECONDS + 0.5)
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(first)
        (second,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert (str(second), second.delivery_count) == ("slow consumer", 1)
        receiver.complete_message(second)


def test_renew_lock_keeps_the_message(client: ServiceBusClient) -> None:
    """Renewing before expiry extends locked_until; the consumer completes after the first lock ran out."""
    _send(client, "work", "long job")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        first_until = message.locked_until_utc
        for _ in range(6):  # 3 s in all, renewed every quarter of the 2 s lock
            time.sleep(LOCK_SECONDS / 4)
            receiver.renew_message_lock(message)
        assert message.locked_until_utc is not None
        assert first_until is not None
        assert message.locked_until_utc > first_until
        receiver.complete_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_defer_then_receive_deferred(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """A deferred message leaves the active flow and is fetched by sequence number, then completed."""
    _send(client, "work", "later")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.defer_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        assert emulator.runtime_properties("work")["deferred_message_count"] == 1
        assert message.sequence_number is not None
        (deferred,) = receiver.receive_deferred_messages([message.sequence_number])
        assert str(deferred) == "later"
        receiver.complete_message(deferred)
    assert emulator.runtime_properties("work")["deferred_message_count"] == 0


def test_dead_letter_forwarding(client: ServiceBusClient) -> None:
    """ForwardDeadLetteredMessagesTo sends dead-lettered messages to another queue, reason included."""
    _send(client, "fragile", "breaks once")
    with client.get_queue_receiver("fragile", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.abandon_message(message)
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (forwarded,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(forwarded) == "breaks once"
        assert forwarded.application_properties is not None
        assert forwarded.application_properties[b"DeadLetterReason"] == b"MaxDeliveryCountExceeded"


def test_dead_letter_queue_message_cannot_be_dead_lettered_again(client: ServiceBusClient) -> None:
    """Dead-lettering a message read from a DLQ is refused; the message stays there unchanged."""
    _send(client, "work", "twice")
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="First")
    with client.get_queue_receiver("work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
        (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        with pytest.raises(ServiceBusError):
            dlq.dead_letter_message(dead, reason="Second")
    with client.get_queue_receiver("work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5) as dlq:
        (again,) = dlq.peek_messages(max_message_count=5)
        assert (str(again), again.dead_letter_reason) == ("twice", "First")


def test_auto_lock_renewer_keeps_message_and_session_locks(client: ServiceBusClient) -> None:
    """The SDK's AutoLockRenewer (as the local Functions host uses it) keeps both kinds of lock alive."""
    _send(client, "work", "long handler")
    with client.get_queue_sender("sessions") as sender:
        sender.send_messages(ServiceBusMessage("long session step", session_id="renewed"))
    with (
        client.get_queue_receiver("work", max_wait_time=5) as receiver,
        client.get_queue_receiver("sessions", session_id="renewed", max_wait_time=5) as session_receiver,
        # Closed (its renewals finished) before the receivers: a renewal racing a receiver's close
        # fails on the closed management link and the SDK logs it as an error.
        AutoLockRenewer(max_lock_renewal_duration=30) as renewer,
    ):
        renewer.register(session_receiver, session_receiver.session)
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        (step,) = session_receiver.receive_messages(max_message_count=1, max_wait_time=5)
        renewer.register(receiver, message)
        time.sleep(LOCK_SECONDS * 2)
        receiver.complete_message(message)
        session_receiver.complete_message(step)
