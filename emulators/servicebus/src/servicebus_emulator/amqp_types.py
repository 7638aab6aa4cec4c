"""AMQP 1.0 primitive types that have no plain-Python equivalent.

Plain Python values map to the obvious AMQP types (``int`` -> long, ``float`` -> double,
``str`` -> string, ``bytes`` -> binary, ``uuid.UUID`` -> uuid, ``list`` -> list, ``dict`` -> map).
Every other AMQP type has a small wrapper class here; the codec always decodes to the wrapper, so
a value keeps its wire type through a decode/encode cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Narrow and wide constructors of one type (sym8/sym32, smalluint/uint, list8/list32...) are one
# type; arrays are always written with the wide one.
WIDE_CONSTRUCTOR = {
    0xC0: 0xD0,
    0xC1: 0xD1,
    0x52: 0x70,
    0x43: 0x70,
    0x53: 0x80,
    0x44: 0x80,
    0x54: 0x71,
    0x55: 0x81,
    0xA0: 0xB0,
    0xA1: 0xB1,
    0xA3: 0xB3,
    0x41: 0x56,
    0x42: 0x56,
}


class Symbol(str):
    """AMQP symbol (ASCII name, used for keys, conditions and descriptors)."""


class Char(str):
    """AMQP char: one Unicode code point (UTF-32 on the wire)."""


class UByte(int):
    """AMQP ubyte."""


class UShort(int):
    """AMQP ushort."""


class UInt(int):
    """AMQP uint."""


class ULong(int):
    """AMQP ulong."""


class Byte(int):
    """AMQP byte."""


class Short(int):
    """AMQP short."""


class Int(int):
    """AMQP int."""


class Long(int):
    """AMQP long (also what a plain ``int`` encodes to)."""


class Float(float):
    """AMQP float (IEEE 754 binary32)."""


class Timestamp(int):
    """AMQP timestamp: milliseconds since the Unix epoch."""

    @classmethod
    def from_datetime(cls, moment: datetime) -> Timestamp:
        return cls(int(moment.timestamp() * 1000))

    def to_datetime(self) -> datetime:
        return datetime.fromtimestamp(self / 1000, tz=UTC)


class Decimal32(bytes):
    """AMQP decimal32, kept as its raw 4 bytes."""


class Decimal64(bytes):
    """AMQP decimal64, kept as its raw 8 bytes."""


class Decimal128(bytes):
    """AMQP decimal128, kept as its raw 16 bytes."""


class Array(list[Any]):
    """AMQP array: every element shares one constructor (``element_code``)."""

    def __init__(self, items: list[Any] | tuple[Any, ...] = (), element_code: int = 0xA1) -> None:
        super().__init__(items)
        # Narrow and wide constructors of one type (sym8/sym32, smalluint/uint...) are one type.
        self.element_code = WIDE_CONSTRUCTOR.get(element_code, element_code)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Array) and self.element_code == other.element_code and list.__eq__(self, other)
        )

    __hash__ = None  # a list: mutable, so unhashable


@dataclass(frozen=True)
class Described:
    """A described type: a descriptor (symbol or ulong) and the value it describes."""

    descriptor: Any
    value: Any
