"""AMQP 1.0 messages as the broker sees them: parsed once on arrival, re-encoded on delivery.

The broker needs a few properties (message id, session id, TTL, application properties for
filters) and adds its own annotations on every delivery; everything else (the body above all) is
kept as the raw bytes the client sent and copied through untouched.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from servicebus_emulator.amqp_types import Described, Symbol, UInt, ULong
from servicebus_emulator.codec import decode_list_items, decode_value, encode_value, uint
from servicebus_emulator.frames import FrameError

BATCH_MESSAGE_FORMAT = 0x80013700
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = (
    0x70,
    0x71,
    0x72,
    0x73,
    0x74,
)
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x75, 0x76, 0x77, 0x78
HEADER_FIELDS = ("durable", "priority", "ttl", "first_acquirer", "delivery_count")
PROPERTY_FIELDS = (
    "message_id",
    "user_id",
    "to",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "absolute_expiry_time",
    "creation_time",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
)


_ANNOTATIONS_DESCRIPTOR = b"\x00\x53\x72"  # described, smallulong 0x72 (message-annotations)
_HEADER_DESCRIPTOR = b"\x00\x53\x70"


class MessageFormatError(FrameError):
    """The transfer payload is not a well-formed AMQP message."""


def _fields(names: tuple[str, ...], value: Any) -> dict[str, Any]:
    items = value if isinstance(value, list) else []
    return {name: item for name, item in zip(names, items, strict=False) if item is not None}


_U32 = struct.Struct(">I")


def _section(buf: memoryview, offset: int) -> tuple[int, Any, int]:
    """One section at ``offset``: its descriptor code, value and end. The header and properties
    lists are read by ``decode_list_items``; a data section is only measured (the body is kept as
    bytes); anything else goes through ``decode_value``."""
    if len(buf) > offset + 5 and buf[offset] == 0x00 and buf[offset + 1] == 0x53:
        code, constructor = buf[offset + 2], buf[offset + 3]
        if constructor == 0xC0 and code in (HEADER, PROPERTIES):
            items, end = decode_list_items(buf, offset + 6, buf[offset + 5])
            return code, items, end
        if code == DATA and (constructor == 0xA0 or constructor == 0xB0):
            if constructor == 0xA0:
                end = offset + 5 + buf[offset + 4]
            elif len(buf) >= offset + 8:
                end = offset + 8 + _U32.unpack_from(buf, offset + 4)[0]
            else:
                raise MessageFormatError("a data section runs past the end of the message")
            if end > len(buf):
                raise MessageFormatError("a data section runs past the end of the message")
            return code, None, end
    section, end = decode_value(buf, offset)
    if not isinstance(section, Described) or not isinstance(section.descriptor, int):
        raise MessageFormatError("a message section is not a described type")
    return section.descriptor, section.value, end


_HEADER_ITEMS: dict[tuple[Any, ...], bytes] = {}  # most messages share one of a few headers


def _header_items(header: dict[str, Any]) -> bytes:
    """The header's fields but delivery-count, encoded as list items (cached by value and type)."""
    values = tuple(map(header.get, HEADER_FIELDS[:-1]))
    key = (values, tuple(map(type, values)))
    cached = _HEADER_ITEMS.get(key)
    if cached is None:
        items = bytearray()
        for value in values:
            encode_value(value, items)
        cached = bytes(items)
        if len(_HEADER_ITEMS) < 256:  # bounded: TTLs vary per client
            _HEADER_ITEMS[key] = cached
    return cached


def _annotations_head(own: tuple[bytes, int], extra: bytes, extra_count: int) -> bytes:
    """The message annotations section up to the end of the message's own items (``extra``, the
    broker's, follows): descriptor, map constructor, size and count, then the own items."""
    items, count = own
    size = len(items) + len(extra)
    count += extra_count
    if size < 255 and count < 256:
        return _ANNOTATIONS_DESCRIPTOR + bytes((0xC1, size + 1, count)) + items
    return _ANNOTATIONS_DESCRIPTOR + b"\xd1" + struct.pack(">II", size + 4, count) + items


def _as_list(names: tuple[str, ...], values: dict[str, Any]) -> list[Any]:
    items = [values.get(name) for name in names]
    while items and items[-1] is None:
        items.pop()
    return items


@dataclass
class AmqpMessage:
    """One message: decoded header, annotations and properties; the body as raw encoded sections."""

    header: dict[str, Any] = field(default_factory=dict)
    annotations: dict[Any, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    application_properties: dict[Any, Any] = field(default_factory=dict)
    body: bytes = b""
    _tail: bytes | None = field(default=None, repr=False, compare=False)
    # The bytes it was parsed from, while nothing changed: storing a fresh message needs no encoding.
    _raw: bytes | None = field(default=None, repr=False, compare=False)
    # The message's own annotations, encoded as map items, and their count (see ``encode``).
    _annotation_items: tuple[bytes, int] | None = field(default=None, repr=False, compare=False)
    # The header's first four fields encoded as list items (delivery-count, the last, varies).
    _header_items: bytes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: bytes | memoryview) -> AmqpMessage:
        """Parse an encoded message (a sequence of described sections)."""
        buf = memoryview(raw)
        message = cls()
        offset = 0
        tail_start: int | None = None  # the client's own encoding of the tail sections, reused
        try:
            while offset < len(buf):
                start = offset
                code, value, offset = _section(buf, offset)
                if code in (PROPERTIES, APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE):
                    tail_start = start if tail_start is None else tail_start
                elif tail_start is not None:
                    tail_start = -1  # sections out of the standard order: encode the tail ourselves
                if code == HEADER:
                    message.header = _fields(HEADER_FIELDS, value)
                elif code == MESSAGE_ANNOTATIONS and isinstance(value, dict):
                    message.annotations = value
                elif code == PROPERTIES:
                    message.properties = _fields(PROPERTY_FIELDS, value)
                elif code == APPLICATION_PROPERTIES and isinstance(value, dict):
                    message.application_properties = value
                elif code in (DATA, AMQP_SEQUENCE, AMQP_VALUE):
                    message.body = bytes(buf[start:])
                    break
                elif code not in (DELIVERY_ANNOTATIONS, FOOTER):
                    raise MessageFormatError(f"unknown message section 0x{code:x}")
        except ValueError as exc:
            raise MessageFormatError(f"malformed message: {exc}") from exc
        message._raw = bytes(buf)
        if tail_start is not None and tail_start >= 0 and message.body:
            message._tail = message._raw[tail_start:]
        return message

    def changed(self) -> None:
        """Forget the cached encodings after any section was modified."""
        self._tail = None
        self._raw = None
        self._annotation_items = None
        self._header_items = None

    def tail(self) -> bytes:
        """Properties, application properties and body, encoded (cached: they rarely change)."""
        if self._tail is None:
            out = bytearray()
            if self.properties:
                encode_value(Described(ULong(PROPERTIES), _as_list(PROPERTY_FIELDS, self.properties)), out)
            if self.application_properties:
                encode_value(Described(ULong(APPLICATION_PROPERTIES), self.application_properties), out)
            out += self.body
            self._tail = bytes(out)
        return self._tail

    def encode(
        self, *, delivery_count: int | None = None, annotations: dict[Any, Any] | None = None
    ) -> bytes:
        """The whole message; ``delivery_count`` and ``annotations`` are the broker's additions."""
        if delivery_count is None and not annotations and self._raw is not None:
            return self._raw
        out = bytearray()
        header = dict(self.header)
        if delivery_count is not None:
            header["delivery_count"] = UInt(delivery_count)
        if header:
            encode_value(Described(ULong(HEADER), _as_list(HEADER_FIELDS, header)), out)
        if annotations and not any(key in self.annotations for key in annotations):
            self._encode_annotations(annotations, out)
        else:
            merged = {**self.annotations, **annotations} if annotations else self.annotations
            if merged:
                encode_value(Described(ULong(MESSAGE_ANNOTATIONS), merged), out)
        out += self.tail()
        return bytes(out)

    def _encode_annotations(self, extra: dict[Any, Any], out: bytearray) -> None:
        """The message annotations section of the message's own plus ``extra`` (disjoint keys),
        byte for byte what ``encode_value`` writes for the merged map, with the message's own
        items encoded once per message instead of once per delivery."""
        body = bytearray()
        for key, value in extra.items():
            encode_value(key, body)
            encode_value(value, body)
        self._annotations_section(bytes(body), 2 * len(extra), out)

    def _own_annotation_items(self) -> tuple[bytes, int]:
        """The message's own annotations encoded as map items, and their count (cached)."""
        if self._annotation_items is None:
            items = bytearray()
            for key, value in self.annotations.items():
                encode_value(key, items)
                encode_value(value, items)
            self._annotation_items = (bytes(items), 2 * len(self.annotations))
        return self._annotation_items

    def _annotations_section(self, extra: bytes, extra_count: int, out: bytearray) -> None:
        out += _annotations_head(self._own_annotation_items(), extra, extra_count)
        out += extra

    def encode_delivery(self, delivery_count: int, extra: bytes, extra_count: int) -> bytes:
        """What ``encode(delivery_count=..., annotations=...)`` writes, the broker's annotations
        given already encoded (``extra``: ``extra_count`` map items whose keys the message's own
        annotations must not have): the delivery fast path, one join of a few parts."""
        if self._header_items is None:
            self._header_items = _header_items(self.header)
        count = uint(delivery_count)  # the header's last field: at most 14 bytes, a short list
        own = self._own_annotation_items()
        return b"".join(
            (
                _HEADER_DESCRIPTOR,
                bytes((0xC0, len(self._header_items) + len(count) + 1, len(HEADER_FIELDS))),
                self._header_items,
                count,
                _annotations_head(own, extra, extra_count),
                extra,
                self.tail(),
            )
        )

    def copy(self) -> AmqpMessage:
        """An independent copy (each subscription or DLQ gets its own)."""
        return AmqpMessage(
            dict(self.header),
            dict(self.annotations),
            dict(self.properties),
            dict(self.application_properties),
            self.body,
            self._tail,
            self._raw,
            self._annotation_items,
            self._header_items,
        )

    def body_sections(self) -> Iterator[Described]:
        """The body sections, decoded (used to unpack batches)."""
        buf = memoryview(self.body)
        offset = 0
        while offset < len(buf):
            section, offset = decode_value(buf, offset)
            if isinstance(section, Described) and section.descriptor in (DATA, AMQP_SEQUENCE, AMQP_VALUE):
                yield section

    # --- the Service Bus view of the standard fields ---

    @property
    def message_id(self) -> str | None:
        value = self.properties.get("message_id")
        return None if value is None else str(value)

    @property
    def session_id(self) -> str | None:
        value = self.properties.get("group_id")
        return None if value is None else str(value)

    @property
    def ttl_ms(self) -> int | None:
        value = self.header.get("ttl")
        return int(value) if value else None

    def annotation(self, name: str) -> Any:
        return self.annotations.get(Symbol(name))


def split_batch(message: AmqpMessage) -> list[AmqpMessage]:
    """The inner messages of a batch transfer (format 0x80013700): one data section each."""
    buf = memoryview(message.body)
    inner = []
    offset = 0
    while offset < len(buf):
        code, value, end = _section(buf, offset)
        if code in (DATA, AMQP_SEQUENCE, AMQP_VALUE):  # other sections (a footer) are skipped
            if code != DATA or not isinstance(value, bytes | None):
                raise MessageFormatError("a batch body section is not a data section")
            if value is None:  # measured by _section: the binary starts after its size
                value = buf[offset + (5 if buf[offset + 3] == 0xA0 else 8) : end]
            inner.append(AmqpMessage.parse(value))
        offset = end
    return inner
