"""Conformance steps: what an application relies on, through the public SDK calls only, each on
entities it creates. They run against the emulator and, given a connection string, against a real
namespace (conftest.py); ``python -m tests.integration.servicebus.conformance`` prints both side by
side. Durations are Azure's minimums or more (a 5 s lock), so the same step is valid on both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage, ServiceBusSubQueue
from azure.servicebus.management import SqlRuleAction, SqlRuleFilter

from tests.integration.servicebus.conformance.conftest import Target

WAIT = 10  # seconds a receive may wait for a message that is there


def test_send_receive_complete(target: Target, names: Any) -> None:
    queue = names.queue()
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage(f"m{n}") for n in range(3)])
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            received: list[ServiceBusReceivedMessage] = []
            while len(received) < 3:
                received += receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
            for message in received:
                receiver.complete_message(message)
            assert [str(message) for message in received] == ["m0", "m1", "m2"]
            assert receiver.peek_messages(max_message_count=10) == []


def test_abandon_redelivers_with_a_higher_delivery_count(target: Target, names: Any) -> None:
    queue = names.queue(max_delivery_count=5)
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("again"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            (first,) = receiver.receive_messages(max_wait_time=WAIT)
            receiver.abandon_message(first)
            (second,) = receiver.receive_messages(max_wait_time=WAIT)
            assert (first.delivery_count, second.delivery_count) == (0, 1)
            assert second.sequence_number == first.sequence_number
            receiver.complete_message(second)


def test_dead_letter_keeps_reason_and_description(target: Target, names: Any) -> None:
    queue = names.queue()
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("bad"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            receiver.dead_letter_message(message, reason="Invalid", error_description="not parseable")
        with client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT
        ) as dead_letters:
            (dead,) = dead_letters.receive_messages(max_wait_time=WAIT)
            assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
                "Invalid",
                "not parseable",
            )
            dead_letters.complete_message(dead)


def test_max_delivery_count_dead_letters(target: Target, names: Any) -> None:
    queue = names.queue(max_delivery_count=2)
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("poison"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            for _ in range(2):
                (message,) = receiver.receive_messages(max_wait_time=WAIT)
                receiver.abandon_message(message)
            assert receiver.receive_messages(max_wait_time=2) == []
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            (dead,) = dead_letters.receive_messages(max_wait_time=WAIT)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_defer_then_receive_by_sequence_number(target: Target, names: Any) -> None:
    queue = names.queue()
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("later"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            receiver.defer_message(message)
            assert receiver.receive_messages(max_wait_time=2) == []
            assert message.sequence_number is not None
            (deferred,) = receiver.receive_deferred_messages([message.sequence_number])
            assert str(deferred) == "later"
            receiver.complete_message(deferred)


def test_schedule_and_cancel(target: Target, names: Any) -> None:
    queue = names.queue()
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            at = datetime.now(UTC) + timedelta(hours=1)
            kept, cancelled = sender.schedule_messages(
                [ServiceBusMessage("kept"), ServiceBusMessage("x")], at
            )
            sender.cancel_scheduled_messages(cancelled)
        with client.get_queue_receiver(queue) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [message.sequence_number for message in peeked] == [kept]
            assert peeked[0].scheduled_enqueue_time_utc is not None
    with target.admin() as admin:
        assert admin.get_queue_runtime_properties(queue).scheduled_message_count == 1


def test_duplicate_detection_drops_a_repeated_message_id(target: Target, names: Any) -> None:
    queue = names.queue(requires_duplicate_detection=True)
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("one", message_id="same"))
            sender.send_messages(ServiceBusMessage("two", message_id="same"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            received = receiver.receive_messages(max_message_count=10, max_wait_time=WAIT)
            assert [str(message) for message in received] == ["one"]


def test_a_session_keeps_order_and_state(target: Target, names: Any) -> None:
    queue = names.queue(requires_session=True)
    with target.client() as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage(f"s{n}", session_id="a") for n in range(3)])
        with client.get_queue_receiver(queue, session_id="a", max_wait_time=WAIT) as receiver:
            received: list[ServiceBusReceivedMessage] = []
            while len(received) < 3:
                received += receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
            assert [str(message) for message in received] == ["s0", "s1", "s2"]
            session = receiver.session
            assert session is not None
            session.set_state(b"step 3")
            assert session.get_state() == b"step 3"


def test_a_subscription_rule_filters_and_acts(target: Target, names: Any) -> None:
    topic = names.topic()
    with target.admin() as admin:
        admin.create_subscription(topic, "high")
        admin.delete_rule(topic, "high", "$Default")
        admin.create_rule(
            topic,
            "high",
            "priority",
            filter=SqlRuleFilter("priority = @level", parameters={"@level": "high"}),
            action=SqlRuleAction("SET sys.Label = 'urgent'"),
        )
    with target.client() as client:
        with client.get_topic_sender(topic) as sender:
            for level in ("low", "high"):
                sender.send_messages(ServiceBusMessage(level, application_properties={"priority": level}))
        with client.get_subscription_receiver(topic, "high", max_wait_time=WAIT) as receiver:
            (message,) = receiver.receive_messages(max_message_count=10, max_wait_time=WAIT)
            assert (str(message), message.subject) == ("high", "urgent")


def test_management_refusals(target: Target, names: Any) -> None:
    queue = names.queue()
    with target.admin() as admin:
        with pytest.raises(ResourceExistsError):
            admin.create_queue(queue)
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue(queue + "-missing")
        with pytest.raises(ResourceNotFoundError):
            admin.delete_queue(queue + "-missing")
        with pytest.raises(HttpResponseError) as refused:
            admin.create_queue(queue + "-lock", lock_duration=timedelta(seconds=4))
        assert refused.value.status_code == 400
        with pytest.raises(HttpResponseError) as changed:
            admin.update_queue(admin.get_queue(queue), requires_session=True)
        assert changed.value.status_code == 400
