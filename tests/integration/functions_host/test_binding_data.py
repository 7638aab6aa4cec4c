"""The trigger's model_binding_data, decoded by the binding extension's own converter (no broker needed)."""

from __future__ import annotations

import uuid

import pytest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Header, Message, Properties
from azurefunctions.extensions.base import Datum
from azurefunctions.extensions.bindings.servicebus import ServiceBusConverter
from azurefunctions.extensions.bindings.servicebus import ServiceBusReceivedMessage as BoundMessage

from local.functions_host.binding_data import BINDING_SOURCE, model_binding_data

LOCK_TOKEN = uuid.UUID("fc53a15f-dd66-494f-825d-ee1b7c343cfb")


def _received() -> ServiceBusReceivedMessage:
    """A message as our receiver gets it: header (second delivery), broker annotations, properties."""
    raw = Message(
        header=Header(delivery_count=1),
        message_annotations={b"x-opt-enqueued-time": 1796100118722, b"x-opt-sequence-number": 12},
        properties=Properties(message_id=b"m-1", group_id=b"session-1"),
        application_properties={b"tenant": b"t-1", b"size": 3_000_000_000},
        data=[b"hello"],
    )
    return ServiceBusReceivedMessage(raw, receiver=None, lock_token=LOCK_TOKEN)


def _decode(azure_layout: bool) -> ServiceBusReceivedMessage:
    data = model_binding_data(_received(), azure_layout=azure_layout)
    assert (data.version, data.source, data.content_type) == (
        "1.0",
        BINDING_SOURCE,
        "application/octet-stream",
    )
    decoded = ServiceBusConverter.decode(
        Datum(value=data, type="model_binding_data"), trigger_metadata={}, pytype=BoundMessage
    )
    assert isinstance(decoded, ServiceBusReceivedMessage)
    return decoded


@pytest.mark.parametrize("azure_layout", [False, True])
def test_extension_decodes_the_message_without_a_receiver(azure_layout: bool) -> None:
    message = _decode(azure_layout)
    assert b"".join(message.body) == b"hello"
    assert (message.message_id, message.session_id, message.sequence_number) == ("m-1", "session-1", 12)
    assert str(message.lock_token) == str(LOCK_TOKEN)
    assert message.application_properties == {b"tenant": b"t-1", b"size": 3_000_000_000}
    assert message.enqueued_time_utc is not None
    assert message._receiver is None


def test_azure_layout_loses_the_delivery_count_with_this_extension() -> None:
    """Pins the reason for the local layout: with the host's exact bytes the extension skips the AMQP
    header. When this fails, the extension keeps the header: drop the local layout (binding_data.py)."""
    assert _decode(azure_layout=True).delivery_count is None
    assert _decode(azure_layout=False).delivery_count == 1
