"""Precompiled encodings of the frames the steady state is made of: transfer, disposition, flow.

The generic path (``frames.composite`` + ``frames.encode_frame``) builds a described list of
wrapper values and walks it through ``codec.encode_value``, some 20 calls per frame. Here each
frame is a few byte concatenations; the result is byte for byte what the generic path writes (a
unit test compares them), so either may be used for any frame.
"""

from __future__ import annotations

import struct

from local.servicebus.codec import encode, uint
from local.servicebus.frames import FRAME_AMQP, FRAME_HEADER, composite

_PAIR32 = struct.Struct(">II")
_NULL, _TRUE, _FALSE = b"\x40", b"\x41", b"\x42"
ACCEPTED_STATE = encode(composite("accepted"))


def _frame(channel: int, code: int, items: bytes, count: int, payload: bytes = b"") -> bytes:
    """A frame whose body is the described list ``code`` of ``count`` encoded ``items``."""
    if len(items) < 255 and count < 256:
        head = bytes((0x00, 0x53, code, 0xC0, len(items) + 1, count))
    else:
        head = bytes((0x00, 0x53, code, 0xD0)) + _PAIR32.pack(len(items) + 4, count)
    return FRAME_HEADER.pack(8 + len(head) + len(items) + len(payload), 2, FRAME_AMQP, channel) + (
        head + items + payload
    )


def transfer_frame(
    channel: int, handle: int, delivery_id: int, tag: bytes, *, settled: bool, more: bool, payload: bytes
) -> bytes:
    """transfer(handle, delivery-id, delivery-tag, message-format 0, settled[, more]) + payload."""
    if len(tag) > 255:
        raise ValueError("a delivery tag is at most 32 bytes")
    items = (
        uint(handle)
        + uint(delivery_id)
        + bytes((0xA0, len(tag)))
        + tag
        + b"\x43"
        + (_TRUE if settled else _FALSE)
        + (_TRUE if more else b"")
    )
    return _frame(channel, 0x14, items, 6 if more else 5, payload)


def disposition_frame(
    channel: int, *, role: bool, first: int, last: int | None, settled: bool, state: bytes
) -> bytes:
    """disposition(role, first, last, settled, state) with ``state`` already encoded."""
    items = (
        (_TRUE if role else _FALSE)
        + uint(first)
        + (_NULL if last is None else uint(last))
        + (_TRUE if settled else _FALSE)
        + state
    )
    return _frame(channel, 0x15, items, 5)


def flow_frame(
    channel: int,
    *,
    next_incoming_id: int,
    window: int,
    next_outgoing_id: int,
    handle: int,
    delivery_count: int,
    link_credit: int,
    drain: bool,
) -> bytes:
    """A link flow: the session's ids and windows (incoming = outgoing = ``window``), then the
    link's handle, delivery count and credit[, drain]."""
    window_bytes = uint(window)
    items = (
        uint(next_incoming_id)
        + window_bytes
        + uint(next_outgoing_id)
        + window_bytes
        + uint(handle)
        + uint(delivery_count)
        + uint(link_credit)
        + (_NULL + _TRUE if drain else b"")
    )
    return _frame(channel, 0x13, items, 9 if drain else 7)
