"""A sample project's tests: the real azure-servicebus SDK against the pytest plugin's emulator."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient
from servicebus_emulator import RunningEmulator


def test_an_order_sent_is_received_once(servicebus_connection_string: str) -> None:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("order 1"))
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            receiver.complete_message(message)
            assert str(message) == "order 1"
            assert receiver.receive_messages(max_wait_time=1) == []


def test_a_message_left_behind(servicebus_connection_string: str) -> None:
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_sender("orders") as sender,
    ):
        sender.send_messages(ServiceBusMessage("left behind"))


def test_the_next_test_sees_an_empty_queue(servicebus_connection_string: str) -> None:
    """Runs after the test above (pytest keeps the file's order): each test has its own emulator."""
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_receiver("orders") as receiver,
    ):
        assert receiver.peek_messages(max_message_count=10) == []


@pytest.mark.servicebus_emulator(
    {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "own"}]}]}}
)
def test_a_marked_test_gets_its_own_topology(servicebus_connection_string: str) -> None:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        with client.get_queue_sender("own") as sender:
            sender.send_messages(ServiceBusMessage("mine"))
        with client.get_queue_receiver("own", max_wait_time=5) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["mine"]


def test_a_subscription_rule_filters_events(servicebus_emulator: RunningEmulator) -> None:
    with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
        with client.get_topic_sender("events") as sender:
            for amount in (50, 500):
                sender.send_messages(
                    ServiceBusMessage(str(amount), application_properties={"amount": amount})
                )
        with client.get_subscription_receiver("events", "large", max_wait_time=5) as receiver:
            received = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert [str(message) for message in received] == ["500"]


def test_the_stock_administration_client_counts_messages(
    servicebus_connection_string: str,
    servicebus_management_connection_string: str,
    servicebus_certificate_path: str,
) -> None:
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_sender("orders") as sender,
    ):
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    with ServiceBusAdministrationClient.from_connection_string(
        servicebus_management_connection_string, connection_verify=servicebus_certificate_path
    ) as admin:
        assert admin.get_queue_runtime_properties("orders").active_message_count == 2
