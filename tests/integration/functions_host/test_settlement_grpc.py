"""Settlement through the binding extension's own classes: its decoding of the host's model_binding_data
and its ServiceBusMessageActions talking gRPC to the host's Settlement service, against the emulator."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import OperationTimeoutError

from local.functions_host import start_host
from local.functions_host.host_config import ServiceBusOptions

from .conftest import SAMPLE_APP

EXTENSION_ACTIONS = (
    "azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions.ServiceBusMessageActions"
)
# Sample host.json's options, as read from the file (the tests below change one or two of them).
SAMPLE_OPTIONS = ServiceBusOptions(
    max_concurrent_calls=4,
    max_concurrent_sessions=4,
    session_idle_timeout=timedelta(seconds=2),
    max_auto_lock_renewal_duration=timedelta(minutes=1),
    prefetch_count=0,
)


@pytest.fixture
def client(
    servicebus: str, journals: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServiceBusClient]:
    monkeypatch.setenv("SampleServiceBus", servicebus)
    with ServiceBusClient.from_connection_string(servicebus) as bus_client:
        yield bus_client
    _drain(servicebus)


def _drain(connection: str) -> None:
    """Leave the queue empty for the next test (messages a test left behind on purpose)."""
    # No SDK retries: "no session available" is the expected last answer.
    with ServiceBusClient.from_connection_string(connection, retry_total=0) as client:
        _drain_sessions(client)


def _drain_sessions(client: ServiceBusClient) -> None:
    while True:
        try:
            with client.get_queue_receiver(
                "settlements", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
            ) as receiver:
                for message in receiver.receive_messages(max_message_count=50, max_wait_time=1):
                    receiver.complete_message(message)
        except OperationTimeoutError:
            return


def _send(client: ServiceBusClient, bodies: dict[str, str]) -> None:
    with client.get_queue_sender("settlements") as sender:
        sender.send_messages(
            [ServiceBusMessage(body, session_id=session) for session, body in bodies.items()]
        )


def _journal(path: Path, count: int, timeout: float = 60.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.2)
    raise AssertionError(f"expected {count} journal lines within {timeout} s")


def test_each_settlement_action_goes_through_the_extensions_grpc_client(
    client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """complete, abandon, deadletter (reason + description), defer, session state, session lock renewal
    and session release reach the broker
    through the extension's ServiceBusMessageActions; the message the function sees has no receiver."""
    _send(
        client,
        {
            "s-complete": "complete",
            "s-abandon": "abandon",
            "s-dead": "deadletter:bad-input",
            "s-defer": "defer",
            "s-state": "state:step-3",
            "s-renew": "renew",
            "s-release": "release",
        },
    )
    with start_host(SAMPLE_APP, port=0, only=["settlements"]):
        lines = _journal(journals["bus"], 8)  # the abandoned message comes back once
    assert {(line["receiver"], line["actions"]) for line in lines} == {(False, EXTENSION_ACTIONS)}
    outcomes = sorted((str(line["body"]), str(line.get("settled") or line.get("error"))) for line in lines)
    assert outcomes == [
        ("abandon", "abandon"),
        ("abandon", "complete"),
        ("complete", "complete"),
        ("deadletter:bad-input", "deadletter"),
        ("defer", "defer"),
        ("release", "complete"),
        ("renew", "complete"),
        ("state:step-3", "complete"),
    ]
    assert [line["renewed_until_ahead"] for line in lines if line["body"] == "renew"] == [True]
    with client.get_queue_receiver(
        "settlements", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
    ) as dlq:
        [dead] = dlq.receive_messages(max_message_count=5, max_wait_time=5)
        assert (dead.dead_letter_reason, dead.dead_letter_error_description) == ("bad-input", "said so")
        dlq.complete_message(dead)
    [deferred_line] = [line for line in lines if line["body"] == "defer"]
    with client.get_queue_receiver("settlements", session_id="s-defer") as receiver:
        [deferred] = receiver.receive_deferred_messages([int(str(deferred_line["sequence_number"]))])
        assert b"".join(deferred.body) == b"defer"
        receiver.complete_message(deferred)
    with client.get_queue_receiver("settlements", session_id="s-state") as receiver:
        assert receiver.session.get_state() == b"step-3"


def test_long_handler_keeps_its_lock_and_a_lost_lock_surfaces_settlement_error(
    client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """Lock duration 5 s, renewal limit 8 s: a 7 s handler completes its message exactly once; a handler
    that outlives the renewal limit gets the extension's SettlementError (gRPC UNKNOWN), as on Azure."""
    options = ServiceBusOptions(
        **{**vars(SAMPLE_OPTIONS), "max_auto_lock_renewal_duration": timedelta(seconds=8)}
    )
    _send(client, {"s-long": "sleep:7", "s-lost": "lost:15"})
    with start_host(SAMPLE_APP, port=0, only=["settlements"], service_bus=options):
        # Once the session lock is lost the broker hands the session out again: the redelivery
        # completes while the first invocation still sleeps, and the first one's settlement then fails.
        lines = _journal(journals["bus"], 3)
    outcomes = sorted((str(line["body"]), str(line.get("settled") or line.get("error"))) for line in lines)
    assert outcomes == [
        ("lost:15", "['SettlementError', 'complete', 'UNKNOWN']"),
        ("lost:15", "complete"),
        ("sleep:7", "complete"),
    ]


def test_concurrent_sessions_follow_max_concurrent_sessions(
    client: ServiceBusClient, journals: dict[str, Path]
) -> None:
    """With maxConcurrentSessions 2, four busy sessions are handled two at a time, never more."""
    options = ServiceBusOptions(**{**vars(SAMPLE_OPTIONS), "max_concurrent_sessions": 2})
    _send(client, {f"s-busy-{index}": "hold:3" for index in range(4)})
    with start_host(SAMPLE_APP, port=0, only=["settlements"], service_bus=options):
        lines = _journal(journals["bus"], 4)
    assert max(int(str(line["running"])) for line in lines) == 2
    assert {line["settled"] for line in lines} == {"complete"}
