"""Message size per entity, as Premium namespaces have it: MaxMessageSizeInKilobytes set through the
stock administration client (1 - 100 MB), announced on the sender's link so the SDK itself refuses
a larger message with its MessageSizeExceededError; Standard namespaces cannot set it."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError
from servicebus_emulator import RunningEmulator

from tests.integration.servicebus.support import stock_admin_client

MB = 1_000_000


@pytest.fixture
def premium(start: Callable[..., RunningEmulator]) -> RunningEmulator:
    return start(premium=True)


@pytest.mark.slow
def test_a_50_mb_message_through_a_queue_of_its_own_size(premium: RunningEmulator) -> None:
    body = os.urandom(50 * MB)
    with stock_admin_client(premium) as admin:
        created = admin.create_queue("large", max_message_size_in_kilobytes=51200)
        assert created.max_message_size_in_kilobytes == 51200
        assert admin.get_namespace_properties().messaging_sku == "Premium"
    with ServiceBusClient.from_connection_string(premium.connection_string) as client:
        with client.get_queue_sender("large") as sender:
            sender.send_messages(ServiceBusMessage(body))
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(os.urandom(51200 * 1024 + 1)))
        with client.get_queue_receiver("large", max_wait_time=30) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=60)
            assert b"".join(message.body) == body
            receiver.complete_message(message)


def test_premium_entities_default_to_1_mb(premium: RunningEmulator) -> None:
    with stock_admin_client(premium) as admin:
        assert admin.create_queue("plain").max_message_size_in_kilobytes == 1024
    with (
        ServiceBusClient.from_connection_string(premium.connection_string) as client,
        client.get_queue_sender("plain") as sender,
    ):
        sender.send_messages(ServiceBusMessage(os.urandom(MB)))  # 1 MB (decimal) fits in 1 MiB
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(os.urandom(2 * MB)))


def test_sizes_azure_refuses(premium: RunningEmulator, emulator: RunningEmulator) -> None:
    """Standard: no entity size of its own; Premium: 1,024 - 102,400 KB."""
    with stock_admin_client(emulator) as standard, pytest.raises(HttpResponseError, match="Premium"):
        standard.create_queue("large", max_message_size_in_kilobytes=1024)
    with stock_admin_client(premium) as admin:
        for refused in (512, 102401):
            with pytest.raises(HttpResponseError, match="between 1024 and 102400") as raised:
                admin.create_queue(f"size-{refused}", max_message_size_in_kilobytes=refused)
            assert raised.value.status_code == 400
