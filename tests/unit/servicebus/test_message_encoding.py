"""Delivery encoding shortcuts (the client's own tail bytes, annotations encoded once) produce the
same message as encoding every section from the parsed fields."""

from __future__ import annotations

from typing import Any

import pytest
from servicebus_emulator.amqp_types import Described, Symbol, Timestamp, UInt, ULong
from servicebus_emulator.codec import encode_value
from servicebus_emulator.message import (
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    HEADER_FIELDS,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    PROPERTY_FIELDS,
    AmqpMessage,
)


def _section(code: int, value: Any) -> bytes:
    out = bytearray()
    encode_value(Described(ULong(code), value), out)
    return bytes(out)


def _slow(message: AmqpMessage, delivery_count: int, extra: dict[Any, Any]) -> bytes:
    """Every section encoded from the parsed fields with the generic encoder: the reference."""
    header = [message.header.get(name) for name in HEADER_FIELDS[:4]] + [UInt(delivery_count)]
    out = bytearray(_section(HEADER, header))
    out += _section(MESSAGE_ANNOTATIONS, {**message.annotations, **extra})
    if message.properties:
        fields = [message.properties.get(name) for name in PROPERTY_FIELDS]
        while fields and fields[-1] is None:
            fields.pop()
        out += _section(PROPERTIES, fields)
    if message.application_properties:
        out += _section(APPLICATION_PROPERTIES, message.application_properties)
    return bytes(out + message.body)


BROKER = {
    Symbol("x-opt-sequence-number"): 42,
    Symbol("x-opt-enqueued-time"): Timestamp(1_700_000_000_000),
    Symbol("x-opt-locked-until"): Timestamp(1_700_000_060_000),
}
OWN_MANY = {Symbol(f"x-opt-key-{index}"): "v" * 20 for index in range(12)}  # past the 255-byte short form


@pytest.mark.parametrize(
    "own", [{}, {Symbol("x-opt-partition-key"): "p"}, OWN_MANY], ids=["none", "one", "many"]
)
def test_delivery_encoding_matches_the_full_encoding(own: dict[Any, Any]) -> None:
    raw = (
        _section(HEADER, [True])
        + (_section(MESSAGE_ANNOTATIONS, own) if own else b"")
        + _section(PROPERTIES, ["id-1", None, None, "subject"])
        + _section(APPLICATION_PROPERTIES, {"tenant": "acme", "n": 3})
        + _section(DATA, b"x" * 300)
    )
    message = AmqpMessage.parse(raw)
    assert message.encode() == raw  # stored as it arrived
    for count in (0, 1, 7):
        fast = message.encode(delivery_count=count, annotations=dict(BROKER))
        assert fast == _slow(message, count, BROKER)
        again = AmqpMessage.parse(fast)
        assert again.header["delivery_count"] == UInt(count)
        assert again.annotations == {**own, **BROKER}
        assert again.properties == message.properties
        assert again.application_properties == {"tenant": "acme", "n": 3}


def test_sections_out_of_order_and_changes_are_encoded_again() -> None:
    """A tail not in the standard order, or a changed message, is encoded from its fields."""
    raw = (
        _section(PROPERTIES, ["id-2"])
        + _section(MESSAGE_ANNOTATIONS, {Symbol("a"): 1})
        + _section(DATA, b"b")
    )
    message = AmqpMessage.parse(raw)
    assert message.encode(delivery_count=0, annotations=dict(BROKER)) == _slow(message, 0, BROKER)
    message.properties["message_id"] = "changed"
    message.changed()
    assert AmqpMessage.parse(message.encode()).message_id == "changed"
    overriding = {Symbol("a"): 2}  # a broker key the message already has: the merged value wins
    assert AmqpMessage.parse(message.encode(delivery_count=0, annotations=overriding)).annotations == {
        Symbol("a"): 2
    }
