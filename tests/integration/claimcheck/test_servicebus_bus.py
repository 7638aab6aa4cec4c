"""The Service Bus adapter end to end: producer → emulator queue (sessions) → consumer → results topic."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from claimcheck import ClaimCheck, Complete
from claimcheck.adapters.servicebus import ServiceBusBus, inbound_message

from local.servicebus import RunningEmulator, start_emulator
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
