"""The trigger's model_binding_data, decoded by the binding extension's own converter (no broker needed)."""

from __future__ import annotations

import uuid

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Header, Message, Properties
from azurefunctions.extensions.base import Datum
from azurefunctions.extensions.bindings.servicebus import ServiceBusConverter
from azurefunctions.extensions.bindings.servicebus import ServiceBusReceivedMessage as BoundMessage
from claimcheck.adapters.servicebus import inbound_message

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


def _decode() -> ServiceBusReceivedMessage:
    data = model_binding_data(_received())
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


def test_extension_decodes_the_message_without_a_receiver() -> None:
    message = _decode()
    assert b"".join(message.body) == b"hello"
    assert (message.message_id, message.session_id, message.sequence_number) == ("m-1", "session-1", 12)
    assert str(message.lock_token) == str(LOCK_TOKEN)
    assert message.application_properties == {b"tenant": b"t-1", b"size": 3_000_000_000}
    assert message.enqueued_time_utc is not None
    assert message._receiver is None


def test_the_extension_loses_the_delivery_count_so_the_app_counts() -> None:
    """Pins why the consumer counts deliveries itself: with the host's bytes the extension skips the AMQP
    header. When this fails, the extension keeps the header: the app's own count is then never consulted
    (claimcheck.deliveries) and local/functions_host/README.md should say so."""
    message = _decode()
    assert message.delivery_count is None
    inbound = inbound_message(message)
    assert inbound.delivery_count is None
    assert (inbound.message_id, inbound.sequence_number, inbound.lock_token) == ("m-1", 12, str(LOCK_TOKEN))
    # What our own receiver (the SDK, header included) reports for the same delivery: the second.
    assert inbound_message(_received()).delivery_count == 2
