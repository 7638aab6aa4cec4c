"""Type-preserving AMQP 1.0 data encoding and decoding (AMQP 1.0 part 1, "Types").

Decoding returns the wrapper types of ``amqp_types`` wherever plain Python would lose the wire
type, so ``decode(encode(x)) == x`` with the same type for every value the broker re-encodes
(application properties, annotations, management bodies).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from servicebus_emulator.amqp_types import (
    WIDE_CONSTRUCTOR,
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


class DecodeError(ValueError):
    """The bytes are not valid AMQP 1.0 encoded data."""


_FIXED: dict[int, struct.Struct] = {
    0x50: struct.Struct(">B"),
    0x60: struct.Struct(">H"),
    0x70: struct.Struct(">I"),
    0x80: struct.Struct(">Q"),
    0x51: struct.Struct(">b"),
    0x61: struct.Struct(">h"),
    0x71: struct.Struct(">i"),
    0x81: struct.Struct(">q"),
    0x72: struct.Struct(">f"),
    0x82: struct.Struct(">d"),
    0x83: struct.Struct(">q"),
    0x73: struct.Struct(">I"),
    0x52: struct.Struct(">B"),
    0x53: struct.Struct(">B"),
    0x54: struct.Struct(">b"),
    0x55: struct.Struct(">b"),
}
_FIXED_TYPE: dict[int, Callable[[Any], Any]] = {
    0x50: UByte,
    0x60: UShort,
    0x70: UInt,
    0x80: ULong,
    0x51: Byte,
    0x61: Short,
    0x71: Int,
    0x81: Long,
    0x72: Float,
    0x82: float,
    0x83: Timestamp,
    0x73: lambda cp: Char(chr(cp)),
    0x52: UInt,
    0x53: ULong,
    0x54: Int,
    0x55: Long,
}
_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_PAIR8 = struct.Struct(">BB")
_PAIR32 = struct.Struct(">II")

Decoder = Callable[[memoryview, int], tuple[Any, int]]


def _fixed(code: int) -> Decoder:
    fmt, make = _FIXED[code], _FIXED_TYPE[code]

    def decode_fixed(buf: memoryview, off: int) -> tuple[Any, int]:
        return make(fmt.unpack_from(buf, off)[0]), off + fmt.size

    return decode_fixed


def _constant(value: Any) -> Decoder:
    def decode_constant(buf: memoryview, off: int) -> tuple[Any, int]:
        return value, off

    return decode_constant


def _variable(width: struct.Struct, make: Callable[[bytes], Any]) -> Decoder:
    def decode_variable(buf: memoryview, off: int) -> tuple[Any, int]:
        (size,) = width.unpack_from(buf, off)
        start = off + width.size
        if start + size > len(buf):
            raise DecodeError("variable-width value runs past the end of the buffer")
        return make(bytes(buf[start : start + size])), start + size

    return decode_variable


def _raw(size: int, make: Callable[[bytes], Any]) -> Decoder:
    def decode_raw(buf: memoryview, off: int) -> tuple[Any, int]:
        return make(bytes(buf[off : off + size])), off + size

    return decode_raw


def _compound(header: struct.Struct, as_map: bool) -> Decoder:
    def decode_compound(buf: memoryview, off: int) -> tuple[Any, int]:
        _size, count = header.unpack_from(buf, off)
        off += header.size
        items: list[Any] = []
        for _ in range(count):
            item, off = decode_value(buf, off)
            items.append(item)
        if not as_map:
            return items, off
        if count % 2:
            raise DecodeError("map with an odd number of elements")
        return {_hashable(items[i]): items[i + 1] for i in range(0, count, 2)}, off

    return decode_compound


def _array(header: struct.Struct) -> Decoder:
    def decode_array(buf: memoryview, off: int) -> tuple[Any, int]:
        _size, count = header.unpack_from(buf, off)
        off += header.size
        code = buf[off]
        off += 1
        descriptor = None
        if code == 0x00:
            descriptor, off = decode_value(buf, off)
            code = buf[off]
            off += 1
        element = _DECODERS.get(code)
        if element is None:
            raise DecodeError(f"unknown array element constructor 0x{code:02x}")
        items: list[Any] = []
        for _ in range(count):
            item, off = element(buf, off)
            items.append(item if descriptor is None else Described(descriptor, item))
        return Array(items, code), off

    return decode_array


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(key)
    return key


_DECODERS: dict[int, Decoder] = {code: _fixed(code) for code in _FIXED}
_DECODERS.update(
    {
        0x40: _constant(None),
        0x41: _constant(True),
        0x42: _constant(False),
        0x56: lambda buf, off: (buf[off] == 1, off + 1),
        0x43: _constant(UInt(0)),
        0x44: _constant(ULong(0)),
        0x45: _constant([]),
        0x74: _raw(4, Decimal32),
        0x84: _raw(8, Decimal64),
        0x94: _raw(16, Decimal128),
        0x98: _raw(16, lambda raw: uuid.UUID(bytes=raw)),
        0xA0: _variable(_U8, bytes),
        0xB0: _variable(_U32, bytes),
        0xA1: _variable(_U8, lambda raw: raw.decode("utf-8")),
        0xB1: _variable(_U32, lambda raw: raw.decode("utf-8")),
        0xA3: _variable(_U8, lambda raw: Symbol(raw.decode("ascii"))),
        0xB3: _variable(_U32, lambda raw: Symbol(raw.decode("ascii"))),
        0xC0: _compound(_PAIR8, False),
        0xD0: _compound(_PAIR32, False),
        0xC1: _compound(_PAIR8, True),
        0xD1: _compound(_PAIR32, True),
        0xE0: _array(_PAIR8),
        0xF0: _array(_PAIR32),
    }
)


def decode_value(buf: memoryview, off: int = 0) -> tuple[Any, int]:
    """Decode one value at ``off``; return it and the offset just past it."""
    try:
        code = buf[off]
        if code == 0x00:
            descriptor, off = decode_value(buf, off + 1)
            value, off = decode_value(buf, off)
            return Described(descriptor, value), off
        decoder = _DECODERS.get(code)
        if decoder is None:
            raise DecodeError(f"unknown AMQP type constructor 0x{code:02x} at offset {off}")
        return decoder(buf, off + 1)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"truncated or malformed AMQP data at offset {off}") from exc


_TIMESTAMP_BODY = struct.Struct(">q")
_UINT_ZERO = UInt(0)


def decode_list_items(buf: memoryview, off: int, count: int) -> tuple[list[Any], int]:
    """``count`` consecutive values from ``off``, the usual constructors of performative and
    message-property fields read inline (what ``decode_value`` returns, with fewer calls)."""
    items: list[Any] = []
    append = items.append
    try:
        for _ in range(count):
            code = buf[off]
            if code == 0x40:
                append(None)
                off += 1
            elif code == 0x52:
                append(UInt(buf[off + 1]))
                off += 2
            elif code == 0x41 or code == 0x42:
                append(code == 0x41)
                off += 1
            elif code == 0x56:
                append(buf[off + 1] == 1)
                off += 2
            elif code == 0x43:
                append(_UINT_ZERO)
                off += 1
            elif code == 0x70:
                append(UInt(_U32.unpack_from(buf, off + 1)[0]))
                off += 5
            elif code == 0xA1 or code == 0xA3 or code == 0xA0:
                start = off + 2
                end = start + buf[off + 1]
                if end > len(buf):
                    raise DecodeError("variable-width value runs past the end of the buffer")
                raw = bytes(buf[start:end])
                append(
                    raw.decode("utf-8")
                    if code == 0xA1
                    else Symbol(raw.decode("ascii"))
                    if code == 0xA3
                    else raw
                )
                off = end
            elif code == 0x83:
                append(Timestamp(_TIMESTAMP_BODY.unpack_from(buf, off + 1)[0]))
                off += 9
            elif code == 0x00 and buf[off + 1] == 0x53 and buf[off + 3] == 0x45:
                append(Described(ULong(buf[off + 2]), []))  # e.g. the accepted outcome of a disposition
                off += 4
            else:
                value, off = decode_value(buf, off)
                append(value)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"truncated or malformed AMQP data at offset {off}") from exc
    return items, off


def decode(data: bytes | bytearray | memoryview) -> Any:
    """Decode exactly one value from ``data``."""
    buf = memoryview(data)
    value, end = decode_value(buf, 0)
    if end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after the value")
    return value


# --- encoding -----------------------------------------------------------------------------------

_ARRAY_BODY: dict[type, int] = {
    bool: 0x56,
    UByte: 0x50,
    UShort: 0x60,
    UInt: 0x70,
    ULong: 0x80,
    Byte: 0x51,
    Short: 0x61,
    Int: 0x71,
    Long: 0x81,
    int: 0x81,
    Float: 0x72,
    float: 0x82,
    Timestamp: 0x83,
    Char: 0x73,
    Decimal32: 0x74,
    Decimal64: 0x84,
    Decimal128: 0x94,
    uuid.UUID: 0x98,
    bytes: 0xB0,
    str: 0xB1,
    Symbol: 0xB3,
}


def _encode_body(code: int, value: Any, out: bytearray) -> None:
    """Write ``value``'s bytes for the fixed constructor ``code`` (no constructor byte)."""
    if code in _FIXED:
        if code == 0x73:
            value = ord(value)
        out += _FIXED[code].pack(value)
    elif code == 0x56:
        out.append(1 if value else 0)
    elif code in (0x74, 0x84, 0x94):
        out += value
    elif code == 0x98:
        out += value.bytes
    elif code in (0xB0, 0xB1, 0xB3):
        raw = value if code == 0xB0 else value.encode("utf-8" if code == 0xB1 else "ascii")
        out += _U32.pack(len(raw))
        out += raw
    elif code in (0xD0, 0xD1):
        items = [part for pair in value.items() for part in pair] if code == 0xD1 else list(value)
        body = bytearray()
        for item in items:
            encode_value(item, body)
        out += _PAIR32.pack(len(body) + 4, len(items))
        out += body
    else:
        raise TypeError(f"cannot encode array elements with constructor 0x{code:02x}")


def _encode_int(value: int, out: bytearray) -> None:
    kind = type(value)
    if kind is UInt:
        out += (
            b"\x43"
            if value == 0
            else (b"\x52" + _U8.pack(value) if value < 256 else b"\x70" + _U32.pack(value))
        )
    elif kind is ULong:
        out += (
            b"\x44"
            if value == 0
            else (b"\x53" + _U8.pack(value) if value < 256 else b"\x80" + _FIXED[0x80].pack(value))
        )
    elif kind is Int:
        out += (
            b"\x54" + _FIXED[0x54].pack(value) if -128 <= value < 128 else b"\x71" + _FIXED[0x71].pack(value)
        )
    elif kind in (int, Long):
        out += (
            b"\x55" + _FIXED[0x55].pack(value) if -128 <= value < 128 else b"\x81" + _FIXED[0x81].pack(value)
        )
    else:
        code = _ARRAY_BODY[kind]
        out.append(code)
        _encode_body(code, value, out)


def _encode_compound(items: list[Any], count: int, small: int, large: int, out: bytearray) -> None:
    body = bytearray()
    for item in items:
        encode_value(item, body)
    if len(body) < 255 and count < 256:
        out += bytes((small, len(body) + 1, count))
    else:
        out.append(large)
        out += _PAIR32.pack(len(body) + 4, count)
    out += body


def _encode_array(value: Array, out: bytearray) -> None:
    code = WIDE_CONSTRUCTOR.get(value.element_code, value.element_code)
    body = bytearray()
    body.append(code)
    for item in value:
        _encode_body(code, item, body)
    out.append(0xF0)
    out += _PAIR32.pack(len(body) + 4, len(value))
    out += body


def _encode_none(value: Any, out: bytearray) -> None:
    out.append(0x40)


def _encode_bool(value: Any, out: bytearray) -> None:
    out.append(0x41 if value else 0x42)


def _encode_described(value: Any, out: bytearray) -> None:
    out.append(0x00)
    encode_value(value.descriptor, out)
    encode_value(value.value, out)


def _encode_list(value: Any, out: bytearray) -> None:
    if not value:
        out.append(0x45)
    else:
        _encode_compound(list(value), len(value), 0xC0, 0xD0, out)


def _encode_map(value: Any, out: bytearray) -> None:
    flat = [part for pair in value.items() for part in pair]
    _encode_compound(flat, len(flat), 0xC1, 0xD1, out)


def _encode_binary(value: Any, out: bytearray) -> None:
    size = len(value)
    out += (b"\xa0" + _U8.pack(size)) if size < 256 else (b"\xb0" + _U32.pack(size))
    out += value


_SYMBOLS: dict[str, bytes] = {}  # encodings of the few symbols that recur (keys, conditions)


def _encode_symbol(value: Any, out: bytearray) -> None:
    cached = _SYMBOLS.get(value)
    if cached is None:
        raw = value.encode("ascii")
        cached = (b"\xa3" + _U8.pack(len(raw)) if len(raw) < 256 else b"\xb3" + _U32.pack(len(raw))) + raw
        if len(raw) <= 64 and len(_SYMBOLS) < 1024:  # bounded: symbols may come from clients
            _SYMBOLS[value] = cached
    out += cached


def _encode_timestamp(value: Any, out: bytearray) -> None:
    out.append(0x83)
    out += _FIXED[0x83].pack(value)


# The frequent exact types first (one dict lookup instead of a chain of isinstance checks);
# anything else, subclasses included, takes the general path below.
_BY_TYPE: dict[type, Any] = {
    type(None): _encode_none,
    bool: _encode_bool,
    Described: _encode_described,
    list: _encode_list,
    dict: _encode_map,
    bytes: _encode_binary,
    Symbol: _encode_symbol,
    Timestamp: _encode_timestamp,
    UInt: _encode_int,
    ULong: _encode_int,
    Long: _encode_int,
    Int: _encode_int,
    int: _encode_int,
}


def encode_value(value: Any, out: bytearray) -> None:
    """Append the AMQP encoding of ``value`` to ``out``."""
    fast = _BY_TYPE.get(type(value))
    if fast is not None:
        fast(value, out)
        return
    if value is None:
        out.append(0x40)
    elif value is True:
        out.append(0x41)
    elif value is False:
        out.append(0x42)
    elif isinstance(value, int):
        _encode_int(value, out)
    elif isinstance(value, str):
        wide = 0xB3 if isinstance(value, Symbol) else 0xB1
        if isinstance(value, Char):
            out.append(0x73)
            _encode_body(0x73, value, out)
            return
        raw = value.encode("ascii" if wide == 0xB3 else "utf-8")
        if len(raw) < 256:
            out.append(wide - 0x10)
            out.append(len(raw))
        else:
            out.append(wide)
            out += _U32.pack(len(raw))
        out += raw
    elif isinstance(value, Decimal32 | Decimal64 | Decimal128):
        code = _ARRAY_BODY[type(value)]
        out.append(code)
        out += value
    elif isinstance(value, bytes | bytearray | memoryview):
        size = len(value)
        out += (b"\xa0" + _U8.pack(size)) if size < 256 else (b"\xb0" + _U32.pack(size))
        out += value
    elif isinstance(value, float):
        code = 0x72 if isinstance(value, Float) else 0x82
        out.append(code)
        out += _FIXED[code].pack(value)
    elif isinstance(value, uuid.UUID):
        out.append(0x98)
        out += value.bytes
    elif isinstance(value, datetime):
        out.append(0x83)
        out += _FIXED[0x83].pack(Timestamp.from_datetime(value))
    elif isinstance(value, Described):
        out.append(0x00)
        encode_value(value.descriptor, out)
        encode_value(value.value, out)
    elif isinstance(value, Array):
        _encode_array(value, out)
    elif isinstance(value, list | tuple):
        if not value:
            out.append(0x45)
        else:
            _encode_compound(list(value), len(value), 0xC0, 0xD0, out)
    elif isinstance(value, dict):
        flat = [part for pair in value.items() for part in pair]
        _encode_compound(flat, len(flat), 0xC1, 0xD1, out)
    else:
        raise TypeError(f"no AMQP encoding for {type(value).__name__}")


_SMALL_UINTS = [b"\x43"] + [bytes((0x52, value)) for value in range(1, 256)]
_TIMESTAMP = struct.Struct(">Bq")
_LONG = struct.Struct(">Bq")


def uint(value: int) -> bytes:
    """The encoding of ``UInt(value)`` (fast paths build frames from these)."""
    if 0 <= value < 256:
        return _SMALL_UINTS[value]
    return b"\x70" + _U32.pack(value)


def long(value: int) -> bytes:
    """The encoding of ``Long(value)`` (or a plain int)."""
    if -128 <= value < 128:
        return bytes((0x55, value & 0xFF))
    return _LONG.pack(0x81, value)


def timestamp(milliseconds: int) -> bytes:
    """The encoding of ``Timestamp(milliseconds)``."""
    return _TIMESTAMP.pack(0x83, milliseconds)


def encode(value: Any) -> bytes:
    """Return the AMQP encoding of ``value``."""
    out = bytearray()
    encode_value(value, out)
    return bytes(out)
