"""The Service Bus adapter end to end: producer → emulator queue (sessions) → consumer → results topic."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusSubQueue
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageProperties
from claimcheck import ClaimCheck, Complete, DeadLetter
from claimcheck.adapters.dead_letter_queue import dead_lettered
from claimcheck.adapters.servicebus import ServiceBusBus, inbound_message
from servicebus_emulator import RunningEmulator
from servicebus_emulator import start as start_emulator

from tests.integration.claimcheck.conftest import Harness, document

Build = Callable[..., Harness]


def _config() -> dict[str, Any]:
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        {
                            "Name": "documents",
                            "Properties": {
                                "RequiresSession": True,
                                "RequiresDuplicateDetection": True,
                                "MaxDeliveryCount": 5,
                                "DuplicateDetectionHistoryTimeWindow": "PT20S",
                                "LockDuration": "PT30S",
                            },
                        }
                    ],
                    "Topics": [
                        {
                            "Name": "results",
                            "Properties": {"RequiresDuplicateDetection": True},
                            "Subscriptions": [
                                {"Name": "audit", "Properties": {}},
                                {
                                    "Name": "notifications",
                                    "Rules": [
                                        {
                                            "Name": "high",
                                            "Properties": {
                                                "FilterType": "Sql",
                                                "SqlFilter": {"SqlExpression": "priority = 'high'"},
                                            },
                                        }
                                    ],
                                },
                                {
                                    "Name": "contracts",
                                    "Rules": [
                                        {
                                            "Name": "contracts",
                                            "Properties": {
                                                "FilterType": "Correlation",
                                                "CorrelationFilter": {
                                                    "Properties": {"document_type": "contract"}
                                                },
                                            },
                                        }
                                    ],
                                },
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    with start_emulator(_config()) as running:
        yield running


def test_document_travels_through_the_emulator_and_the_result_is_routed(
    make_harness: Build, emulator: RunningEmulator
) -> None:
    """A submitted document reaches the session queue, is processed once, and its result is filtered."""
    harness = make_harness()
    bus = ServiceBusBus(connection_string=emulator.connection_string)
    try:
        claimcheck = ClaimCheck.from_settings(
            harness.settings,
            storage_connection=harness.connection,
            bus=bus,
            analyzer=harness.analyzer,
            clock=harness.clock,
        )
        receipt = claimcheck.producer.submit(
            document(40_000),
            tenant_id="tenant-a",
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
            priority="high",
            correlation_id="corr-42",
        )
        with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
            with client.get_queue_receiver(
                "documents", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10
            ) as receiver:
                (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
                assert message.session_id == receipt.work_item_id
                outcome = claimcheck.consumer.handle(inbound_message(message))
                assert outcome == Complete()
                receiver.complete_message(message)
                outcome.after_settlement()  # the cleanup, once the message is completed
            counts = {}
            for subscription in ("audit", "notifications", "contracts"):
                with client.get_subscription_receiver("results", subscription) as receiver:
                    # The publish returned, so routing is done: peeking answers at once, no waiting.
                    peeked = receiver.peek_messages(max_message_count=5)
                    counts[subscription] = len(peeked)
                    assert all(result.correlation_id == "corr-42" for result in peeked)
        # The stand-in analyzer says document_type=contract, priority=normal.
        assert counts == {"audit": 1, "notifications": 0, "contracts": 1}
    finally:
        bus.close()


def test_bodies_and_ids_any_amqp_sender_may_write_are_dead_lettered_and_listed_not_raised(
    make_harness: Build, emulator: RunningEmulator
) -> None:
    """A value or sequence body (not the SDK's data body) is no envelope: the trigger's translation
    (inbound_message) must not raise on it, which would spend every delivery, and the consumer
    dead-letters it invalid_envelope at once. A UUID message id (AMQP allows it; the SDK hands it over
    as is) is listed as text, so the operator route's JSON answer holds it."""
    harness = make_harness()
    bus = ServiceBusBus(connection_string=emulator.connection_string)
    odd_id = uuid.uuid4()
    sent: dict[str, AmqpAnnotatedMessage] = {
        "wi-sequence": AmqpAnnotatedMessage(
            sequence_body=[[1, 2]],
            properties=AmqpMessageProperties(group_id="wi-sequence", message_id="m-seq"),
        ),
        "wi-bytes-value": AmqpAnnotatedMessage(
            value_body=b'{"schema": "claimcheck.envelope"}',
            properties=AmqpMessageProperties(group_id="wi-bytes-value", message_id="m-bytes"),
        ),
        "wi-text-value": AmqpAnnotatedMessage(
            value_body="text", properties=AmqpMessageProperties(group_id="wi-text-value", message_id="m-text")
        ),
        "wi-uuid-id": AmqpAnnotatedMessage(
            data_body=b"{not json", properties=AmqpMessageProperties(group_id="wi-uuid-id", message_id=odd_id)
        ),
    }
    try:
        claimcheck = ClaimCheck.from_settings(
            harness.settings, storage_connection=harness.connection, bus=bus, clock=harness.clock
        )
        with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
            with client.get_queue_sender("documents") as sender:
                for annotated in sent.values():
                    sender.send_messages(annotated)
            outcomes: dict[str | None, DeadLetter] = {}
            for _ in sent:
                with client.get_queue_receiver(
                    "documents", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10
                ) as receiver:
                    (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
                    outcome = claimcheck.consumer.handle(inbound_message(message))
                    assert isinstance(outcome, DeadLetter)
                    outcomes[message.session_id] = outcome
                    receiver.dead_letter_message(
                        message, reason=str(outcome.reason), error_description=outcome.description
                    )
            assert {session: str(o.reason) for session, o in outcomes.items()} == dict.fromkeys(
                sent, "invalid_envelope"
            )
            with client.get_queue_receiver("documents", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
                listed = [dead_lettered(message).to_dict() for message in receiver.peek_messages(10)]
        json.dumps(listed)  # what GET /api/dead-letters answers
        assert {entry["work_item_id"]: entry["message_id"] for entry in listed}["wi-uuid-id"] == str(odd_id)
    finally:
        bus.close()
