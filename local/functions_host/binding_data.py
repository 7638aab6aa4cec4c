"""The Service Bus trigger's argument, built the way the Functions host and Python worker build it.

On Azure the host never hands the worker a receiver: it sends ``model_binding_data`` whose content is
the message's lock token (16 bytes, .NET ``Guid.ToByteArray()`` order, i.e. UUID little-endian)
followed by the whole received AMQP message (header, delivery annotations carrying
``x-opt-lock-token``, message annotations, properties, application properties, body). The worker hands
that datum to the binding extension's own ``ServiceBusConverter``, which decodes it into an
azure-servicebus ``ServiceBusReceivedMessage`` with no receiver.

Extension 1.0.0b2 decodes from just after the first ``x-opt-lock-token`` it finds, which in these bytes
lies after the AMQP header, so ``message.delivery_count`` is None, locally as on Azure; the app then
counts its deliveries itself (claimcheck.deliveries). A test pins what the extension makes of these
bytes, so the day it keeps the header that test fails and the app's count is no longer consulted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp._encode import encode_payload  # the SDK's own AMQP encoder
from azure.servicebus._pyamqp.message import Message as AmqpMessage
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azurefunctions.extensions.base import Datum
from azurefunctions.extensions.bindings.servicebus import ServiceBusConverter

# What the host puts in ParameterBindingData for a received message (ServiceBusExtensionConfigProvider).
BINDING_VERSION = "1.0"
BINDING_SOURCE = "AzureServiceBusReceivedMessage"
BINDING_CONTENT_TYPE = "application/octet-stream"
_X_OPT_LOCK_TOKEN = b"x-opt-lock-token"


@dataclass(frozen=True)
class ModelBindingData:
    """The fields of the worker protocol's ``ModelBindingData`` that the extension reads."""

    version: str
    source: str
    content_type: str
    content: bytes


def model_binding_data(message: ServiceBusReceivedMessage) -> ModelBindingData:
    """The host's binding data for a message received in peek-lock mode by our receiver."""
    lock_token = message.lock_token
    if lock_token is None:
        raise ValueError("only a peek-locked message can be bound to a Service Bus trigger")
    token = lock_token if isinstance(lock_token, uuid.UUID) else uuid.UUID(str(lock_token))
    # The raw AMQP message as received (the SDK keeps it; .NET's GetRawAmqpMessage() is the same
    # thing). The broker sends the lock token in the delivery annotations too; set it in case the
    # delivery carried it only as the delivery tag.
    raw: AmqpMessage = message._message
    annotations: dict[Any, Any] = dict(raw.delivery_annotations or {})
    annotations[_X_OPT_LOCK_TOKEN] = token
    # AMQP fixes the order of the sections (header, delivery annotations, then the rest); the SDK's
    # encoder writes delivery annotations last, so they are encoded one part at a time.
    encoded = bytearray()
    empty = AmqpMessage()
    encode_payload(encoded, empty._replace(header=raw.header))
    encode_payload(encoded, empty._replace(delivery_annotations=_typed(annotations)))
    encode_payload(
        encoded,
        raw._replace(
            header=None,
            delivery_annotations=None,
            message_annotations=_typed(raw.message_annotations),
            application_properties=_typed(raw.application_properties),
        ),
    )
    return ModelBindingData(
        version=BINDING_VERSION,
        source=BINDING_SOURCE,
        content_type=BINDING_CONTENT_TYPE,
        content=token.bytes_le + bytes(encoded),
    )


def _typed(section: dict[Any, Any] | None) -> dict[Any, Any] | None:
    """Decoding dropped the AMQP types of integer values; the encoder would guess int32. Service Bus's
    ``x-opt-*-time``/``locked-until`` annotations are timestamps, every other integer goes back as long."""
    if not section:
        return section
    typed: dict[Any, Any] = {}
    for key, value in section.items():
        if isinstance(value, int) and not isinstance(value, bool):
            name = key.decode() if isinstance(key, bytes) else str(key)
            kind = AMQPTypes.timestamp if name.endswith(("-time", "locked-until")) else AMQPTypes.long
            value = {TYPE: kind, VALUE: value}
        typed[key] = value
    return typed


def trigger_argument(message: ServiceBusReceivedMessage, annotation: object) -> object:
    """What the function's trigger parameter receives: the extension's decoding of the binding data."""
    datum = Datum(value=model_binding_data(message), type="model_binding_data")
    return ServiceBusConverter.decode(datum, trigger_metadata={}, pytype=annotation)
