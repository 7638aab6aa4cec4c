"""Sessions: FIFO per session, parallel sessions, next-available, exclusive locks, session state."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)
from servicebus_emulator import RunningEmulator


def _send(client: ServiceBusClient, messages: list[tuple[str, str]]) -> None:
    with client.get_queue_sender("sessions") as sender:
        sender.send_messages([ServiceBusMessage(body, session_id=session) for session, body in messages])


def _drain(client: ServiceBusClient, session_id: str, count: int) -> list[str]:
    bodies: list[str] = []
    with client.get_queue_receiver("sessions", session_id=session_id, max_wait_time=5) as receiver:
        while len(bodies) < count:
            messages = receiver.receive_messages(max_message_count=count, max_wait_time=5)
            assert messages, f"session {session_id} stopped delivering"
            for message in messages:
                assert message.session_id == session_id
                bodies.append(str(message))
                receiver.complete_message(message)
    return bodies


def test_fifo_within_a_session(client: ServiceBusClient) -> None:
    """Messages of one session arrive in send order, interleaved sessions notwithstanding."""
    _send(client, [(f"s{index % 2}", f"step-{index}") for index in range(10)])
    assert _drain(client, "s0", 5) == ["step-0", "step-2", "step-4", "step-6", "step-8"]
    assert _drain(client, "s1", 5) == ["step-1", "step-3", "step-5", "step-7", "step-9"]


def test_sessions_are_processed_in_parallel(emulator: RunningEmulator) -> None:
    """Two receivers hold two sessions at the same time and each gets only its own messages."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        _send(client, [("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2")])
        results: dict[str, list[str]] = {}
        both_locked = threading.Barrier(2, timeout=30)

        def consume(session_id: str) -> None:
            with (
                ServiceBusClient.from_connection_string(emulator.connection_string) as own,
                own.get_queue_receiver("sessions", session_id=session_id, max_wait_time=5) as receiver,
            ):
                both_locked.wait()
                messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
                results[session_id] = [str(m) for m in messages]
                for message in messages:
                    receiver.complete_message(message)

        threads = [threading.Thread(target=consume, args=(sid,)) for sid in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert results == {"a": ["a1", "a2"], "b": ["b1", "b2"]}


def test_next_available_session(client: ServiceBusClient) -> None:
    """NEXT_AVAILABLE_SESSION locks a session that has messages and reports its id."""
    _send(client, [("work-item-7", "payload")])
    with client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
    ) as receiver:
        assert receiver.session.session_id == "work-item-7"
        assert receiver.session.locked_until_utc is not None
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "payload"
        receiver.complete_message(message)


def test_next_available_waits_for_a_message(client: ServiceBusClient, emulator: RunningEmulator) -> None:
    """A next-available receiver opened before any message exists gets the session sent meanwhile."""

    def send_later() -> None:
        time.sleep(1)
        with ServiceBusClient.from_connection_string(emulator.connection_string) as other:
            _send(other, [("late", "arrived")])

    sender = threading.Thread(target=send_later)
    sender.start()
    with client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10
    ) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert (receiver.session.session_id, str(message)) == ("late", "arrived")
        receiver.complete_message(message)
    sender.join(timeout=30)


def _azure_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("azure") and record.levelno >= logging.WARNING
    ]


def test_next_available_times_out_when_no_session(
    emulator: RunningEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """With no session to lock, next-available raises OperationTimeoutError and the SDK logs no warning."""
    caplog.set_level(logging.INFO, logger="azure")
    # retry_total=0: the SDK retries a failed open, each retry waiting max_wait_time again.
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client,
        pytest.raises(OperationTimeoutError, match=r"com\.microsoft:timeout"),
        client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1) as receiver,
    ):
        receiver.receive_messages(max_message_count=1, max_wait_time=1)
    assert _azure_warnings(caplog) == []


def test_async_next_available_times_out_when_no_session(
    emulator: RunningEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """The asyncio client, too, gets OperationTimeoutError and logs no warning when no session is free."""
    caplog.set_level(logging.INFO, logger="azure")

    async def accept_next() -> None:
        async with (
            AsyncServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client,
            client.get_queue_receiver(
                "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
            ) as receiver,
        ):
            await receiver.receive_messages(max_message_count=1, max_wait_time=1)

    with pytest.raises(OperationTimeoutError, match=r"com\.microsoft:timeout"):
        asyncio.run(asyncio.wait_for(accept_next(), timeout=30))
    assert _azure_warnings(caplog) == []


def test_session_lock_is_exclusive(
    client: ServiceBusClient, emulator: RunningEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A second receiver for a locked session gets SessionCannotBeLockedError, with no SDK warning."""
    caplog.set_level(logging.INFO, logger="azure")
    _send(client, [("exclusive", "x")])
    with (
        client.get_queue_receiver("sessions", session_id="exclusive", max_wait_time=5) as holder,
        # retry_total=0: the SDK retries a refused open, and the holder's short lock would expire.
        ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as other,
    ):
        assert holder.session.session_id == "exclusive"
        with (
            pytest.raises(SessionCannotBeLockedError),
            other.get_queue_receiver("sessions", session_id="exclusive", max_wait_time=5) as intruder,
        ):
            intruder.receive_messages(max_message_count=1, max_wait_time=1)
    assert _azure_warnings(caplog) == []


def test_session_state_and_lock_renewal(client: ServiceBusClient) -> None:
    """Session state set by one receiver is read back by the next; renewing the lock moves locked_until."""
    _send(client, [("stateful", "one")])
    with client.get_queue_receiver("sessions", session_id="stateful", max_wait_time=5) as receiver:
        assert receiver.session.get_state() is None
        receiver.session.set_state(b"checkpoint-1")
        before = receiver.session.locked_until_utc
        time.sleep(0.2)
        after = receiver.session.renew_lock()
        assert before is not None
        assert after > before
    with client.get_queue_receiver("sessions", session_id="stateful", max_wait_time=5) as receiver:
        assert receiver.session.get_state() == b"checkpoint-1"
        receiver.session.set_state(None)
        assert receiver.session.get_state() is None


def test_closing_a_session_receiver_releases_the_session(client: ServiceBusClient) -> None:
    """Unsettled messages of a closed session receiver return at once for the next receiver."""
    _send(client, [("handover", "h1")])
    with client.get_queue_receiver("sessions", session_id="handover", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(message) == "h1"
    assert _drain(client, "handover", 1) == ["h1"]


def test_session_queue_refuses_message_without_session_id(client: ServiceBusClient) -> None:
    """Like the service, a session-enabled queue refuses a message that has no session id."""
    with client.get_queue_sender("sessions") as sender, pytest.raises(ServiceBusError, match="SessionId"):
        sender.send_messages(ServiceBusMessage("orphan"))


def test_list_sessions_via_peek(client: ServiceBusClient) -> None:
    """Peek on a session receiver shows only that session's messages, in order."""
    _send(client, [("p", "p1"), ("q", "q1"), ("p", "p2")])
    with client.get_queue_receiver("sessions", session_id="p", max_wait_time=5) as receiver:
        assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == ["p1", "p2"]


def test_list_queue_sessions(client: ServiceBusClient) -> None:
    """get-message-sessions lists sessions with messages or state; with a time, those whose state changed."""
    _send(client, [("alpha", "a"), ("beta", "b")])
    assert sorted(client.list_queue_sessions("sessions")) == ["alpha", "beta"]
    since = datetime.now(UTC)
    time.sleep(0.05)
    with client.get_queue_receiver("sessions", session_id="beta", max_wait_time=5) as receiver:
        receiver.session.set_state(b"touched")
    assert list(client.list_queue_sessions("sessions", state_updated_after=since)) == ["beta"]


def test_message_locks_in_a_session_follow_the_session_lock(client: ServiceBusClient) -> None:
    """While the session lock is renewed, its messages stay locked past the lock duration (as in Azure)."""
    _send(client, [("long", "slow step")])
    with client.get_queue_receiver("sessions", session_id="long", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        for _ in range(6):  # 3 s in all, renewed every quarter of the 2 s lock
            time.sleep(0.5)
            receiver.session.renew_lock()
        receiver.complete_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_session_lock_expiry_ends_the_receiver(client: ServiceBusClient) -> None:
    """A session lock that is not renewed expires: the receiver fails with SessionLockLostError."""
    _send(client, [("abandoned", "x")])
    with client.get_queue_receiver("sessions", session_id="abandoned", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        time.sleep(3)
        with pytest.raises(SessionLockLostError):
            receiver.complete_message(message)


def test_waiting_receivers_get_different_sessions(emulator: RunningEmulator) -> None:
    """Two next-available receivers that wait together each get their own session once messages arrive."""
    accepted: list[str] = []
    errors: list[BaseException] = []

    def accept() -> None:
        try:
            with (
                ServiceBusClient.from_connection_string(emulator.connection_string) as client,
                client.get_queue_receiver(
                    "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=15
                ) as receiver,
            ):
                assert receiver.session.session_id is not None
                accepted.append(receiver.session.session_id)
                (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                receiver.complete_message(message)
        except BaseException as exc:
            errors.append(exc)

    waiting = [threading.Thread(target=accept) for _ in range(2)]
    for thread in waiting:
        thread.start()
    time.sleep(2)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        _send(client, [("first", "1"), ("second", "2")])
    for thread in waiting:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(accepted) == ["first", "second"]
