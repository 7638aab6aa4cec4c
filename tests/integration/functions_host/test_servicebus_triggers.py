"""Service Bus triggers run through the real SDK against the embedded emulator, as on the Functions host."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from local.functions_host import RunningHost, start_host
from local.functions_host.servicebus_listener import ConnectionSettingMissing

from .conftest import SAMPLE_APP


@pytest.fixture
def bus_host(
    servicebus: str, journals: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningHost]:
    monkeypatch.setenv("SampleServiceBus", servicebus)
    with start_host(SAMPLE_APP, port=0, only=["orders", "events"]) as host:
        yield host


@pytest.fixture
def client(servicebus: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus) as bus_client:
        yield bus_client


def _journal(path: Path, count: int, timeout: float = 30.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.1)
    raise AssertionError(f"expected {count} journal lines within {timeout} s")


def test_each_session_is_processed_in_order(
    bus_host: RunningHost, client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """Messages of one session reach the function one at a time in send order, sessions in parallel."""
    sessions = [f"order-{index}" for index in range(3)]
    with client.get_queue_sender("orders") as sender:
        for step in range(5):
            sender.send_messages(
                [ServiceBusMessage(f"{session}:{step}", session_id=session) for session in sessions]
            )
    lines = _journal(journals["bus"], 15)
    for session in sessions:
        bodies = [line["body"] for line in lines if line["session"] == session]
        assert bodies == [f"{session}:{step}" for step in range(5)]


def test_explicit_deadletter_keeps_reason_and_description(
    bus_host: RunningHost, client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """message_actions.deadletter moves the message to the DLQ with the given reason and description."""
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("poison", session_id="bad-order"))
    with client.get_queue_receiver(
        "orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=20
    ) as dlq:
        dead = dlq.receive_messages(max_message_count=1, max_wait_time=20)
        assert len(dead) == 1
        assert (dead[0].dead_letter_reason, dead[0].dead_letter_error_description) == ("poison", "test")
        dlq.complete_message(dead[0])
    assert not journals["bus"].exists()


def test_exception_leaves_the_message_to_come_back(
    bus_host: RunningHost, client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """A function that raises (auto-complete off: the host settles nothing) gets the message again once
    its session is released (closing the session receiver releases it; whether that counts as a delivery
    is the broker's business, not asserted here)."""
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("crash", session_id="flaky-order"))
    [line] = _journal(journals["bus"], 1)
    assert line["body"] == "crash"


def test_topic_subscription_trigger_auto_completes(
    bus_host: RunningHost, client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """A subscription trigger without explicit settlement completes the message when the function returns."""
    with client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("hello"))
    assert _journal(journals["bus"], 1) == [{"subscription": "all", "body": "hello"}]
    bus_host.stop()
    with client.get_subscription_receiver("events", "all", max_wait_time=2) as receiver:
        assert receiver.receive_messages(max_message_count=1, max_wait_time=2) == []


def test_stop_ends_every_listener_thread(bus_host: RunningHost) -> None:
    """After stop() no Service Bus worker thread is left running."""
    bus_host.stop()
    assert [thread.name for thread in threading.enumerate() if thread.name.startswith("sb-")] == []


def test_missing_connection_setting_is_named(
    journals: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trigger whose connection app setting is unset fails the start, naming the setting."""
    monkeypatch.delenv("SampleServiceBus", raising=False)
    with pytest.raises(ConnectionSettingMissing, match="SampleServiceBus"):
        start_host(SAMPLE_APP, port=0, only=["events"])
