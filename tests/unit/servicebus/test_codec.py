"""The AMQP 1.0 codec keeps every value and its wire type through encode/decode."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from servicebus_emulator.amqp_types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from servicebus_emulator.codec import DecodeError, decode, encode
from servicebus_emulator.message import AmqpMessage, split_batch

EVERY_TYPE: list[Any] = [
    None,
    True,
    False,
    UByte(255),
    UShort(65535),
    UInt(0),
    UInt(200),
    UInt(2**32 - 1),
    ULong(0),
    ULong(7),
    ULong(2**64 - 1),
    Byte(-128),
    Short(-32768),
    Int(-5),
    Int(2**31 - 1),
    Long(-1),
    Long(2**63 - 1),
    Float(1.5),
    -2.25,
    Decimal32(b"\x01\x02\x03\x04"),
    Decimal64(bytes(range(8))),
    Decimal128(bytes(range(16))),
    Char("é"),
    Timestamp(1_700_000_000_123),
    uuid.UUID(int=42),
    b"",
    b"\x00" * 300,
    "",
    "ünïcødé" * 50,
    Symbol("x-opt-a"),
    Symbol("s" * 300),
    [],
    [Long(1), "two", [UInt(3)]],
    {"key": Long(1), Symbol("sym"): {Long(2): None}},
    Array([UInt(1), UInt(300)], 0x70),
    Array([Symbol("a"), Symbol("b")], 0xA3),
    Array([], 0x98),
    Array([uuid.UUID(int=1)], 0x98),
    Array([True, False], 0x56),
    Array([Long(1), Long(-2)], 0x81),
    Array([[Long(1)], []], 0xD0),
    Array([{"k": "v"}], 0xD1),
    Described(ULong(0x24), []),
    Described(Symbol("com.microsoft:test"), {"a": Long(1)}),
]


@pytest.mark.parametrize("value", EVERY_TYPE, ids=lambda value: type(value).__name__)
def test_every_type_round_trips_with_its_type(value: Any) -> None:
    """decode(encode(x)) equals x and has the same Python (hence AMQP) type."""
    decoded = decode(encode(value))
    assert decoded == value
    assert type(decoded) is type(value)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1).map(Long),
    st.integers(0, 2**32 - 1).map(UInt),
    st.integers(0, 2**64 - 1).map(ULong),
    st.integers(-(2**31), 2**31 - 1).map(Int),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.text(alphabet=st.characters(max_codepoint=127)).map(Symbol),
    st.uuids(),
    st.integers(-(2**63), 2**63 - 1).map(Timestamp),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


@given(values)
def test_any_nested_value_round_trips(value: Any) -> None:
    """Arbitrary nested lists and maps of scalars survive a round trip unchanged."""
    assert decode(encode(value)) == value


@pytest.mark.parametrize("data", [b"\xa1\x05abc", b"\xff", b"\xc0\x05\x02\x41", b"\x41\x41"])
def test_malformed_data_raises_decode_error(data: bytes) -> None:
    """Truncated, unknown or trailing bytes raise DecodeError instead of returning garbage."""
    with pytest.raises(DecodeError):
        decode(data)


def test_message_sections_round_trip() -> None:
    """A parsed message re-encodes with the broker's delivery count and annotations added."""
    original = AmqpMessage(
        header={"durable": True},
        properties={"message_id": "m-1", "group_id": "s-1"},
        application_properties={"tenant": "acme"},
        body=encode(Described(ULong(0x75), b"payload")),
    )
    parsed = AmqpMessage.parse(
        original.encode(delivery_count=2, annotations={Symbol("x-opt-sequence-number"): 7})
    )
    assert (parsed.message_id, parsed.session_id) == ("m-1", "s-1")
    assert parsed.header["delivery_count"] == 2
    assert parsed.annotation("x-opt-sequence-number") == 7
    assert parsed.application_properties == {"tenant": "acme"}
    assert parsed.body == original.body


def test_batch_splits_into_inner_messages() -> None:
    """A batch body (one data section per message) unpacks into the inner messages."""
    inner = [
        AmqpMessage(properties={"message_id": f"m{index}"}, body=encode(Described(ULong(0x77), index)))
        for index in range(3)
    ]
    batch = AmqpMessage(body=b"".join(encode(Described(ULong(0x75), message.encode())) for message in inner))
    assert [message.message_id for message in split_batch(batch)] == ["m0", "m1", "m2"]
