"""AMQP 1.0 frames and composite types: performatives, SASL frames, source/target, outcomes, errors.

A composite travels as a described list; here it is a plain ``dict`` keyed by the spec's field
names (with ``_`` for ``-``), converted in one place in each direction.
"""

from __future__ import annotations

import struct
from typing import Any

from servicebus_emulator.amqp_types import Described, Symbol, ULong
from servicebus_emulator.codec import decode_list_items, decode_value, encode_value

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
FRAME_AMQP = 0
FRAME_SASL = 1
FRAME_HEADER = struct.Struct(">IBBH")

COMPOSITES: dict[str, tuple[int, tuple[str, ...]]] = {
    "open": (
        0x10,
        (
            "container_id",
            "hostname",
            "max_frame_size",
            "channel_max",
            "idle_time_out",
            "outgoing_locales",
            "incoming_locales",
            "offered_capabilities",
            "desired_capabilities",
            "properties",
        ),
    ),
    "begin": (
        0x11,
        (
            "remote_channel",
            "next_outgoing_id",
            "incoming_window",
            "outgoing_window",
            "handle_max",
            "offered_capabilities",
            "desired_capabilities",
            "properties",
        ),
    ),
    "attach": (
        0x12,
        (
            "name",
            "handle",
            "role",
            "snd_settle_mode",
            "rcv_settle_mode",
            "source",
            "target",
            "unsettled",
            "incomplete_unsettled",
            "initial_delivery_count",
            "max_message_size",
            "offered_capabilities",
            "desired_capabilities",
            "properties",
        ),
    ),
    "flow": (
        0x13,
        (
            "next_incoming_id",
            "incoming_window",
            "next_outgoing_id",
            "outgoing_window",
            "handle",
            "delivery_count",
            "link_credit",
            "available",
            "drain",
            "echo",
            "properties",
        ),
    ),
    "transfer": (
        0x14,
        (
            "handle",
            "delivery_id",
            "delivery_tag",
            "message_format",
            "settled",
            "more",
            "rcv_settle_mode",
            "state",
            "resume",
            "aborted",
            "batchable",
        ),
    ),
    "disposition": (0x15, ("role", "first", "last", "settled", "state", "batchable")),
    "detach": (0x16, ("handle", "closed", "error")),
    "end": (0x17, ("error",)),
    "close": (0x18, ("error",)),
    "error": (0x1D, ("condition", "description", "info")),
    "received": (0x23, ("section_number", "section_offset")),
    "accepted": (0x24, ()),
    "rejected": (0x25, ("error",)),
    "released": (0x26, ()),
    "modified": (0x27, ("delivery_failed", "undeliverable_here", "message_annotations")),
    "source": (
        0x28,
        (
            "address",
            "durable",
            "expiry_policy",
            "timeout",
            "dynamic",
            "dynamic_node_properties",
            "distribution_mode",
            "filter",
            "default_outcome",
            "outcomes",
            "capabilities",
        ),
    ),
    "target": (
        0x29,
        (
            "address",
            "durable",
            "expiry_policy",
            "timeout",
            "dynamic",
            "dynamic_node_properties",
            "capabilities",
        ),
    ),
    "sasl_mechanisms": (0x40, ("sasl_server_mechanisms",)),
    "sasl_init": (0x41, ("mechanism", "initial_response", "hostname")),
    "sasl_outcome": (0x44, ("code", "additional_data")),
}
_BY_CODE = {code: (name, fields) for name, (code, fields) in COMPOSITES.items()}


class FrameError(ValueError):
    """A frame or composite that does not follow the AMQP 1.0 specification."""


def composite(kind: str, /, **fields: Any) -> Described:
    """Build the described list for composite ``kind``; omitted fields are null."""
    code, names = COMPOSITES[kind]
    unknown = set(fields) - set(names)
    if unknown:
        raise KeyError(f"{kind} has no field(s) {sorted(unknown)}")
    values = [fields.get(field) for field in names]
    while values and values[-1] is None:
        values.pop()
    return Described(ULong(code), values)


def composite_name(value: Any) -> str | None:
    """The composite name of a described value (e.g. ``"accepted"``), or None."""
    if not isinstance(value, Described):
        return None
    entry = _BY_CODE.get(value.descriptor) if isinstance(value.descriptor, int) else None
    return entry[0] if entry else None


def fields_of(value: Any) -> dict[str, Any]:
    """Decode a described composite to a dict of its fields (missing trailing fields are None)."""
    if not isinstance(value, Described) or not isinstance(value.descriptor, int):
        raise FrameError("expected a described composite with a numeric descriptor")
    entry = _BY_CODE.get(value.descriptor)
    if entry is None:
        raise FrameError(f"unknown composite descriptor 0x{value.descriptor:x}")
    items = value.value if isinstance(value.value, list) else []
    names = entry[1]
    return {field: (items[i] if i < len(items) else None) for i, field in enumerate(names)}


def error(condition: str, description: str | None = None, info: dict[Any, Any] | None = None) -> Described:
    """An AMQP error composite, all three fields present (the SDK indexes them without checking)."""
    return Described(ULong(0x1D), [Symbol(condition), description, info])


def encode_frame(
    channel: int, body: Described, payload: bytes | memoryview = b"", frame_type: int = FRAME_AMQP
) -> bytes:
    """One complete frame: 8-byte header, the encoded performative, then the payload."""
    out = bytearray(8)
    encode_value(body, out)
    out += payload
    FRAME_HEADER.pack_into(out, 0, len(out), 2, frame_type, channel)
    return bytes(out)


EMPTY_FRAME = FRAME_HEADER.pack(8, 2, FRAME_AMQP, 0)


# The performatives of the steady state (flow, transfer, disposition): their fields are decoded by
# ``decode_list_items``, which reads the usual constructors inline.
_HOT = {code: (name, fields) for name, (code, fields) in COMPOSITES.items() if code in (0x13, 0x14, 0x15)}


def _parse_hot(body: memoryview, name: str, names: tuple[str, ...]) -> tuple[str, dict[str, Any], memoryview]:
    items, off = decode_list_items(body, 6, body[5])  # 0xc0 list8: size, count, then the items
    fields = dict.fromkeys(names)
    fields.update(zip(names, items, strict=False))  # fields past the spec's are ignored, as in fields_of
    return name, fields, body[off:]


def parse_frame_body(body: memoryview) -> tuple[str, dict[str, Any], memoryview]:
    """Split a frame body (after the header) into performative name, fields and payload."""
    hot = (
        _HOT.get(body[2]) if len(body) > 6 and body[0] == 0 and body[1] == 0x53 and body[3] == 0xC0 else None
    )
    if hot is not None:
        try:
            return _parse_hot(body, *hot)
        except (IndexError, struct.error) as exc:
            raise FrameError(f"truncated {hot[0]} performative") from exc
    performative, end = decode_value(body, 0)
    name = composite_name(performative)
    if name is None:
        raise FrameError("frame body is not a known performative")
    return name, fields_of(performative), body[end:]
