"""Precompiled encodings of the frames the steady state is made of: transfer, disposition, flow;
and the one frame a receiver sends per message, its accepted disposition, read without decoding.

The generic path (``frames.composite`` + ``frames.encode_frame``) builds a described list of
wrapper values and walks it through ``codec.encode_value``, some 20 calls per frame. Here each
frame is a few byte concatenations; the result is byte for byte what the generic path writes (a
unit test compares them), so either may be used for any frame. ``accepted_disposition`` reads
only the exact layouts it knows and answers None for anything else, which then takes the generic
path (``frames.parse_frame_body``).
"""

from __future__ import annotations

import struct

from servicebus_emulator.codec import encode, uint
from servicebus_emulator.frames import FRAME_AMQP, FRAME_HEADER, composite

_PAIR32 = struct.Struct(">II")
_U32 = struct.Struct(">I")
_NULL, _TRUE, _FALSE = b"\x40", b"\x41", b"\x42"
ACCEPTED_STATE = encode(composite("accepted"))


def _frame(channel: int, code: int, items: bytes, count: int, payload: bytes = b"") -> bytes:
    """A frame whose body is the described list ``code`` of ``count`` encoded ``items``."""
    if len(items) < 255 and count < 256:
        head = bytes((0x00, 0x53, code, 0xC0, len(items) + 1, count))
    else:
        head = bytes((0x00, 0x53, code, 0xD0)) + _PAIR32.pack(len(items) + 4, count)
    size = 8 + len(head) + len(items) + len(payload)
    return b"".join((FRAME_HEADER.pack(size, 2, FRAME_AMQP, channel), head, items, payload))


def transfer_frame(
    channel: int, handle: int, delivery_id: int, tag: bytes, *, settled: bool, more: bool, payload: bytes
) -> bytes:
    """transfer(handle, delivery-id, delivery-tag, message-format 0, settled[, more]) + payload."""
    if len(tag) > 255:
        raise ValueError("a delivery tag is at most 32 bytes")
    items = b"".join(
        (
            uint(handle),
            uint(delivery_id),
            bytes((0xA0, len(tag))),
            tag,
            b"\x43",
            _TRUE if settled else _FALSE,
            _TRUE if more else b"",
        )
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


# The settled echo of an accepted delivery, disposition(role=sender, first, null, settled, accepted):
# everything but the frame header's size and channel and the delivery id is fixed. By the width of
# the encoded id (1, 2 or 5 bytes): the performative's head before it, and its size.
_ECHO_TAIL = _NULL + _TRUE + ACCEPTED_STATE
_ECHO_HEAD = {
    width: bytes((0x00, 0x53, 0x15, 0xC0, 2 + width + len(_ECHO_TAIL), 5)) + _FALSE for width in (1, 2, 5)
}
_ECHO_SIZE = {width: 8 + len(_ECHO_HEAD[width]) + width + len(_ECHO_TAIL) for width in (1, 2, 5)}


def accepted_echo_frame(channel: int, delivery_id: int) -> bytes:
    """``disposition_frame(channel, role=False, first=delivery_id, last=None, settled=True,
    state=ACCEPTED_STATE)``: the broker's answer to each completion, in three concatenations."""
    first = uint(delivery_id)
    width = len(first)
    return (
        FRAME_HEADER.pack(_ECHO_SIZE[width], 2, FRAME_AMQP, channel) + _ECHO_HEAD[width] + first + _ECHO_TAIL
    )


_ACCEPTED_LIST0 = b"\x00\x53\x24\x45"
_ACCEPTED_EMPTY_LIST8 = b"\x00\x53\x24\xc0\x01\x00"


def _uint_at(body: memoryview, off: int) -> tuple[int, int] | None:
    code = body[off]
    if code == 0x52:
        return body[off + 1], off + 2
    if code == 0x43:
        return 0, off + 1
    if code == 0x70:
        return _U32.unpack_from(body, off + 1)[0], off + 5
    return None


def _bool_at(body: memoryview, off: int) -> tuple[bool, int] | None:
    code = body[off]
    if code == 0x41 or code == 0x42:
        return code == 0x41, off + 1
    if code == 0x56 and body[off + 1] <= 1:
        return body[off + 1] == 1, off + 2
    return None


def accepted_disposition(body: memoryview) -> tuple[int, int, bool] | None:
    """A frame body that is a receiver's disposition(role=receiver, first[, last], settled, accepted
    [, batchable]) in a layout clients write (list8, uint and boolean constructors): its first and
    last delivery ids and settled flag. None for anything else, also for valid encodings it does not
    know (the generic parser decides those), never an exception."""
    try:
        if (
            body[0] != 0x00
            or body[1] != 0x53
            or body[2] != 0x15
            or body[3] != 0xC0
            or len(body) != 5 + body[4]
        ):
            return None
        count = body[5]
        if count != 5 and count != 6:
            return None
        role = _bool_at(body, 6)
        if role is None or not role[0]:
            return None
        first = _uint_at(body, role[1])
        if first is None:
            return None
        off = first[1]
        if body[off] == 0x40:
            last, off = first[0], off + 1
        else:
            decoded = _uint_at(body, off)
            if decoded is None:
                return None
            last, off = decoded
        settled = _bool_at(body, off)
        if settled is None:
            return None
        off = settled[1]
        if body[off : off + 4] == _ACCEPTED_LIST0:
            off += 4
        elif body[off : off + 6] == _ACCEPTED_EMPTY_LIST8:
            off += 6
        else:
            return None
        if count == 6:
            if body[off] == 0x40:
                off += 1
            else:
                batchable = _bool_at(body, off)
                if batchable is None:
                    return None
                off = batchable[1]
        if off != len(body):
            return None
        return first[0], last, settled[0]
    except (IndexError, struct.error):
        return None
