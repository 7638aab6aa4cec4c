"""Shared-key authentication, restart durability (subprocess broker), and concurrent clients."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusAuthenticationError
from servicebus_emulator import RunningEmulator, SharedAccessKey, connection_string, start_process

from tests.integration.servicebus.support import emulator_config


def test_right_key_is_accepted(emulator: RunningEmulator) -> None:
    """The connection string the emulator prints (its configured key) works."""
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender("work") as sender,
    ):
        sender.send_messages(ServiceBusMessage("authorized"))
    assert emulator.runtime_properties("work")["active_message_count"] == 1


@pytest.mark.parametrize(
    "key",
    [
        SharedAccessKey("RootManageSharedAccessKey", "wrong-key"),
        SharedAccessKey("SomeOtherRule", "SAS_KEY_VALUE"),
    ],
)
def test_wrong_key_is_refused(emulator: RunningEmulator, key: SharedAccessKey) -> None:
    """A token signed with another key, or for another key name, fails with ServiceBusAuthenticationError."""
    with (
        ServiceBusClient.from_connection_string(
            connection_string(emulator.port, key), retry_total=0
        ) as client,
        pytest.raises(ServiceBusAuthenticationError),
        client.get_queue_sender("work") as sender,
    ):
        sender.send_messages(ServiceBusMessage("intruder"))
    assert emulator.runtime_properties("work")["active_message_count"] == 0


def test_restart_keeps_messages_state_and_schedule(tmp_path: Path) -> None:
    """After a SIGKILL and a restart on the same --data, active, dead-lettered, deferred and scheduled
    messages and session state are all still there; locks simply expired."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    data = tmp_path / "data"
    first = start_process(config, data_dir=data)
    deferred_seq = 0
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("work") as sender:
                sender.send_messages([ServiceBusMessage(f"m{index}") for index in range(4)])
                sender.schedule_messages(
                    ServiceBusMessage("scheduled"), datetime.now(UTC) + timedelta(hours=1)
                )
            with client.get_queue_receiver("work", max_wait_time=5) as receiver:
                first_two = receiver.receive_messages(max_message_count=2, max_wait_time=5)
                assert [str(m) for m in first_two] == ["m0", "m1"]
                receiver.dead_letter_message(first_two[0], reason="Broken", error_description="kept")
                receiver.defer_message(first_two[1])
                deferred_seq = first_two[1].sequence_number or 0
                (locked,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                assert str(locked) == "m2"  # left locked: the crash must not lose it
            with client.get_queue_sender("sessions") as sender:
                sender.send_messages(ServiceBusMessage("s", session_id="kept"))
            with client.get_queue_receiver("sessions", session_id="kept", max_wait_time=5) as receiver:
                receiver.session.set_state(b"state-before-crash")
        first.kill()
    finally:
        first.stop()

    with (
        start_process(config, data_dir=data) as second,
        ServiceBusClient.from_connection_string(second.connection_string) as client,
    ):
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert sorted(str(m) for m in peeked) == ["m1", "m2", "m3", "scheduled"]
            (deferred,) = receiver.receive_deferred_messages([deferred_seq])
            assert str(deferred) == "m1"
            receiver.complete_message(deferred)
            active = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            assert sorted(str(m) for m in active) == ["m2", "m3"]
        with client.get_queue_receiver(
            "work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
        ) as dlq:
            (dead,) = dlq.receive_messages(max_message_count=1, max_wait_time=5)
            assert (str(dead), dead.dead_letter_reason) == ("m0", "Broken")
        with client.get_queue_receiver("sessions", session_id="kept", max_wait_time=5) as receiver:
            assert receiver.session.get_state() == b"state-before-crash"
        with client.get_queue_sender("work") as sender:
            sender.send_messages(ServiceBusMessage("after restart"))
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            newest = receiver.peek_messages(max_message_count=10)[-1]
            assert str(newest) == "after restart"
            assert (newest.sequence_number or 0) > deferred_seq + 3


def test_bad_config_refuses_to_start(tmp_path: Path) -> None:
    """The CLI exits with an error naming the bad entry instead of serving a half-valid namespace."""
    config = emulator_config()
    config["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]["LockDurationTypo"] = "PT1M"
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match=r"Queues\[work\].*LockDurationTypo"):
        start_process(path)


def test_concurrent_senders_and_receivers_lose_and_duplicate_nothing(
    start: Callable[..., RunningEmulator],
) -> None:
    """20 sender threads and 20 receiver threads: every message is completed exactly once."""
    emulator = start()
    senders, per_sender = 20, 25
    expected = {f"{sender}-{index}" for sender in range(senders) for index in range(per_sender)}
    completed: Counter[str] = Counter()
    guard = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def send(sender_id: int) -> None:
        try:
            with (
                ServiceBusClient.from_connection_string(emulator.connection_string) as client,
                client.get_queue_sender("work") as sender,
            ):
                for index in range(per_sender):
                    sender.send_messages(ServiceBusMessage(f"{sender_id}-{index}"))
        except BaseException as exc:
            errors.append(exc)

    def receive() -> None:
        try:
            with (
                ServiceBusClient.from_connection_string(emulator.connection_string) as client,
                client.get_queue_receiver("work", max_wait_time=1, prefetch_count=5) as receiver,
            ):
                while not done.is_set():
                    for message in receiver.receive_messages(max_message_count=5, max_wait_time=1):
                        receiver.complete_message(message)
                        with guard:
                            completed[str(message)] += 1
                            if len(completed) == len(expected):
                                done.set()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(senders)]
    threads += [threading.Thread(target=receive) for _ in range(20)]
    for thread in threads:
        thread.start()
    done.wait(timeout=120)
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert set(completed) == expected
    assert max(completed.values()) == 1
    assert emulator.runtime_properties("work")["active_message_count"] == 0


def test_sigkill_right_after_an_acknowledgement_loses_nothing(tmp_path: Path) -> None:
    """Group commit still commits before each acknowledgement: a SIGKILL the moment a batch send or a
    completion is acknowledged keeps every sent message and resurrects no completed one. A lone
    completion is a record in the removal journal; a dead-letter (the copy and the removal in one
    transaction) goes through SQLite: both survive."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    data = tmp_path / "data"
    sent = [f"m{index:02d}" for index in range(50)]
    first = start_process(config, data_dir=data)
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("work") as sender:
                sender.send_messages([ServiceBusMessage(body) for body in sent])
            first.kill()  # the batch was acknowledged: nothing of it may be lost
    finally:
        first.stop()

    second = start_process(config, data_dir=data)
    completed: list[str] = []
    dead_lettered = ""
    try:
        with (
            ServiceBusClient.from_connection_string(second.connection_string) as client,
            client.get_queue_receiver("work", max_wait_time=5) as receiver,
        ):
            assert sorted(str(m) for m in receiver.peek_messages(max_message_count=100)) == sent
            (to_dead_letter,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.dead_letter_message(to_dead_letter, reason="Broken")
            dead_lettered = str(to_dead_letter)
            while len(completed) < 20:
                for message in receiver.receive_messages(
                    max_message_count=20 - len(completed), max_wait_time=5
                ):
                    receiver.complete_message(message)
                    completed.append(str(message))
            second.kill()  # right after the 20th completion was acknowledged
    finally:
        second.stop()

    with (
        start_process(config, data_dir=data) as third,
        ServiceBusClient.from_connection_string(third.connection_string) as client,
        client.get_queue_receiver("work", max_wait_time=5) as receiver,
        client.get_queue_receiver("work", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq,
    ):
        remaining = sorted(str(m) for m in receiver.peek_messages(max_message_count=100))
        dead = [(str(m), m.dead_letter_reason) for m in dlq.peek_messages(max_message_count=10)]
    assert remaining == sorted(set(sent) - set(completed) - {dead_lettered})
    assert dead == [(dead_lettered, "Broken")]
