"""Sending and receiving through the emulator with the real azure-servicebus SDK."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError, MessagingEntityNotFoundError
from servicebus_emulator import RunningEmulator


def test_send_receive_complete(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """A sent message arrives with its body, properties and broker annotations, and complete removes it."""
    with client.get_queue_sender("work") as sender:
        sender.send_messages(
            ServiceBusMessage(
                "hello",
                message_id="m-1",
                subject="greeting",
                content_type="text/plain",
                correlation_id="c-1",
                application_properties={"tenant": "acme", "attempt": 2, "ratio": 0.5, "flag": True},
            )
        )
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "hello"
        assert (message.message_id, message.subject, message.content_type, message.correlation_id) == (
            "m-1",
            "greeting",
            "text/plain",
            "c-1",
        )
        assert message.application_properties == {
            b"tenant": b"acme",
            b"attempt": 2,
            b"ratio": 0.5,
            b"flag": True,
        }
        assert message.sequence_number == 1
        assert message.delivery_count == 0
        assert message.enqueued_time_utc is not None
        assert message.locked_until_utc is not None
        assert message.lock_token is not None
        receiver.complete_message(message)
    assert emulator.runtime_properties("work")["active_message_count"] == 0


def test_a_message_sent_without_id_gets_one_from_the_broker(client: ServiceBusClient) -> None:
    """As on Azure, the broker gives an id-less message a GUID in 32 hex digits; a given id is kept.

    ServiceBusMessage always carries an id made by the Python SDK; a raw AMQP message has none (as a
    JavaScript SDK message sent without ``messageId``)."""
    bare = [AmqpAnnotatedMessage(data_body=b"no id"), AmqpAnnotatedMessage(data_body=b"no id")]
    with client.get_queue_sender("work") as sender:
        sender.send_messages(bare)
        sender.send_messages(ServiceBusMessage("x", message_id="mine"))
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        received = receiver.receive_messages(max_message_count=3, max_wait_time=5)
        while len(received) < 3:
            received += receiver.receive_messages(max_message_count=3 - len(received), max_wait_time=5)
        ids = [str(message.message_id) for message in received]
        for message in received:
            receiver.complete_message(message)
    assigned = ids[:2]
    assert ids[2] == "mine"
    assert all(re.fullmatch("[0-9a-f]{32}", value) for value in assigned), assigned
    assert assigned[0] != assigned[1]


def test_batch_send_delivers_each_message(client: ServiceBusClient) -> None:
    """A batch (one transfer of format 0x80013700) is unpacked into separate messages, in order."""
    with client.get_queue_sender("work") as sender:
        batch = sender.create_message_batch()
        for index in range(25):
            batch.add_message(ServiceBusMessage(f"item-{index}"))
        sender.send_messages(batch)
    received: list[str] = []
    with client.get_queue_receiver("work", max_wait_time=5, prefetch_count=50) as receiver:
        while len(received) < 25:
            messages = receiver.receive_messages(max_message_count=25, max_wait_time=5)
            assert messages, "the batch's messages stopped arriving"
            for message in messages:
                received.append(str(message))
                receiver.complete_message(message)
    assert received == [f"item-{index}" for index in range(25)]


def test_receive_and_delete_removes_on_delivery(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """RECEIVE_AND_DELETE gets the message once and leaves nothing behind."""
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
    with client.get_queue_receiver(
        "work", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5
    ) as receiver:
        messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert sorted(str(m) for m in messages) == ["one", "two"]
    assert emulator.runtime_properties("work")["active_message_count"] == 0


def test_peek_returns_messages_without_locking(client: ServiceBusClient) -> None:
    """Peek reads from a sequence number on, locks nothing, and an empty range gives an empty list."""
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage(f"p{index}") for index in range(3)])
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        peeked = receiver.peek_messages(max_message_count=10)
        assert [str(m) for m in peeked] == ["p0", "p1", "p2"]
        assert [m.sequence_number for m in peeked] == [1, 2, 3]
        assert receiver.peek_messages(max_message_count=10, sequence_number=2)[0].sequence_number == 2
        assert receiver.peek_messages(max_message_count=10, sequence_number=99) == []
        (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(first) == "p0"


def test_large_message_spans_many_frames(client: ServiceBusClient) -> None:
    """A 200 KB message (several 64 KB frames inbound) arrives byte for byte."""
    body = uuid.uuid4().bytes * (200 * 1024 // 16)
    with client.get_queue_sender("work") as sender:
        sender.send_messages(ServiceBusMessage(body))
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert b"".join(message.body) == body
        receiver.complete_message(message)


def test_message_above_frame_size_in_both_directions(start: Callable[..., RunningEmulator]) -> None:
    """With a 2 MB limit, a 1.5 MB message is split by the client and by the broker (1 MB client frames)."""
    emulator = start(max_message_size=2 * 1024 * 1024)
    body = b"x" * (1536 * 1024)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert b"".join(message.body) == body


def test_oversized_message_raises_size_exceeded(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """Messages over 256 KB (even 3 MB in many frames) get message-size-exceeded; none is stored."""
    with client.get_queue_sender("work") as sender:
        for size in (300 * 1024, 3 * 1024 * 1024):
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(b"x" * size))
        sender.send_messages(ServiceBusMessage("still usable"))
    assert emulator.runtime_properties("work")["active_message_count"] == 1


def test_batch_respects_the_advertised_size_limit(client: ServiceBusClient) -> None:
    """The link advertises 256 KB, so the SDK's batch refuses a message that would not fit."""
    with client.get_queue_sender("work") as sender:
        batch = sender.create_message_batch()
        assert batch.max_size_in_bytes == 256 * 1024
        with pytest.raises(MessageSizeExceededError):
            batch.add_message(ServiceBusMessage(b"x" * (300 * 1024)))


def test_unknown_entity_is_not_found(client: ServiceBusClient) -> None:
    """Sending to a queue that is not in the config raises MessagingEntityNotFoundError."""
    with pytest.raises(MessagingEntityNotFoundError), client.get_queue_sender("nope") as sender:
        sender.send_messages(ServiceBusMessage("lost"))


def test_entity_names_are_case_insensitive(client: ServiceBusClient) -> None:
    """'WORK' and 'work' are the same queue, as in Azure."""
    with client.get_queue_sender("WORK") as sender:
        sender.send_messages(ServiceBusMessage("upper"))
    with client.get_queue_receiver("Work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "upper"


def test_async_client_round_trip(emulator: RunningEmulator) -> None:
    """The asyncio client sends, receives, abandons and completes against the emulator."""

    async def scenario() -> tuple[str, int]:
        async with AsyncServiceBusClient.from_connection_string(emulator.connection_string) as client:
            async with client.get_queue_sender("work") as sender:
                await sender.send_messages(ServiceBusMessage("async hello"))
            async with client.get_queue_receiver("work", max_wait_time=5) as receiver:
                (first,) = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.abandon_message(first)
                (second,) = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.complete_message(second)
                return str(second), second.delivery_count or 0

    body, delivery_count = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert (body, delivery_count) == ("async hello", 1)
    assert emulator.runtime_properties("work")["active_message_count"] == 0
