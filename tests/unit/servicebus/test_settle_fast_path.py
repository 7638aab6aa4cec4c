"""The completion's fast path: a receiver's accepted disposition is read without decoding
(``fastframes.accepted_disposition``) and answered with a precompiled echo; both agree with the
generic codec, anything else falls back to it, and frames split anywhere across reads parse alike.
Lock tokens come with their delivery tag."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from servicebus_emulator.amqp_types import Described, UInt, UShort
from servicebus_emulator.codec import encode
from servicebus_emulator.connection import AmqpConnection, OutputGroup
from servicebus_emulator.fastframes import (
    ACCEPTED_STATE,
    accepted_disposition,
    accepted_echo_frame,
    disposition_frame,
)
from servicebus_emulator.frames import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_HEADER,
    composite,
    encode_frame,
    error,
    parse_frame_body,
)
from servicebus_emulator.model import new_lock_token

uints = st.integers(min_value=0, max_value=2**32 - 1)
STATES = [
    composite("accepted"),
    composite("released"),
    composite("rejected", error=error("amqp:not-found", "gone")),
    composite("modified", undeliverable_here=True),
    composite("received", section_number=UInt(0), section_offset=0),
]
# What the Python SDK (pyamqp) sends to complete a message: booleans as 0x56 0x01/0x00, first as a
# smalluint, last null, settled false, accepted as an empty list0, batchable null.
SDK_COMPLETION = bytes.fromhex("005315c00d06560152014056000053244540")


@given(st.integers(min_value=0, max_value=0xFFFF), uints)
def test_the_accepted_echo_is_the_generic_disposition(channel: int, delivery_id: int) -> None:
    generic = disposition_frame(
        channel, role=False, first=delivery_id, last=None, settled=True, state=ACCEPTED_STATE
    )
    assert accepted_echo_frame(channel, delivery_id) == generic


def _body(**fields: Any) -> memoryview:
    return memoryview(encode_frame(0, composite("disposition", **fields))[8:])


@given(
    st.booleans(),
    uints,
    st.one_of(st.none(), uints),
    st.one_of(st.none(), st.booleans()),
    st.sampled_from(range(len(STATES))),
    st.one_of(st.none(), st.booleans()),
)
def test_an_accepted_disposition_reads_as_the_generic_parser_reads_it(
    role: bool, first: int, last: int | None, settled: bool | None, state: int, batchable: bool | None
) -> None:
    body = _body(
        role=role,
        first=UInt(first),
        last=None if last is None else UInt(last),
        settled=settled,
        state=STATES[state],
        batchable=batchable,
    )
    name, fields, _ = parse_frame_body(body)
    fast = accepted_disposition(body)
    if settled is None or not role or state != 0:
        assert fast is None  # not a receiver's completion in a layout it knows: the generic path
    else:
        assert name == "disposition"
        expected_last = fields["first"] if fields["last"] is None else fields["last"]
        assert fast == (fields["first"], expected_last, bool(fields["settled"]))


def test_the_sdk_completion_is_read_and_a_sender_or_other_outcome_is_not() -> None:
    assert accepted_disposition(memoryview(SDK_COMPLETION)) == (1, 1, False)
    as_sender = SDK_COMPLETION.replace(b"\x56\x01\x52", b"\x56\x00\x52", 1)
    assert accepted_disposition(memoryview(as_sender)) is None
    released = SDK_COMPLETION.replace(b"\x53\x24\x45", b"\x53\x26\x45")
    assert accepted_disposition(memoryview(released)) is None
    assert accepted_disposition(memoryview(SDK_COMPLETION[:-1])) is None  # truncated
    assert accepted_disposition(memoryview(SDK_COMPLETION + b"\x40")) is None  # trailing byte


@given(st.binary(max_size=40))
def test_arbitrary_bytes_never_raise_and_a_match_is_a_generic_accepted_disposition(data: bytes) -> None:
    body = memoryview(b"\x00\x53\x15" + data)
    fast = accepted_disposition(body)
    if fast is not None:
        name, fields, payload = parse_frame_body(body)
        assert (name, bytes(payload)) == ("disposition", b"")
        assert fields["role"] is True
        assert isinstance(fields["state"], Described)
        assert fields["state"].descriptor == 0x24


@dataclass
class _Broker:
    def commit(self) -> None:
        """Nothing to store: the frames here change no message."""


@dataclass
class _Transport:
    written: list[bytes] = field(default_factory=list)

    def get_extra_info(self, name: str) -> Any:
        return None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        """Never closed here."""


def _stream() -> bytes:
    """A client's AMQP traffic without links: header, open, begin, a completion of nothing (the
    fast path), a flow echo request and a transfer on no link (the generic path), end, close."""
    frames = [
        encode_frame(0, composite("open", container_id="client", max_frame_size=UInt(65536))),
        encode_frame(1, composite("begin", next_outgoing_id=UInt(0), incoming_window=UInt(5000))),
        FRAME_HEADER.pack(8 + len(SDK_COMPLETION), 2, FRAME_AMQP, 1) + SDK_COMPLETION,
        encode_frame(
            1,
            composite(
                "flow",
                next_incoming_id=UInt(0),
                incoming_window=UInt(10),
                next_outgoing_id=UInt(0),
                outgoing_window=UInt(10),
                echo=True,
            ),
        ),
        encode_frame(1, composite("transfer", handle=UInt(7), delivery_id=UInt(0)), b"payload"),
        encode_frame(1, composite("end")),
        encode_frame(0, composite("close")),
    ]
    return AMQP_HEADER + b"".join(frames)


def _written(chunks: list[bytes]) -> bytes:
    broker = _Broker()
    output = OutputGroup(broker)  # type: ignore[arg-type]
    output.flushed_before_wait = True  # flushed by hand after each read, as the loop's selector does
    connection = AmqpConnection(broker, None, None, on_lost=lambda _: None, output=output)  # type: ignore[arg-type]
    transport = _Transport()
    connection._transport = transport  # type: ignore[assignment]
    for chunk in chunks:
        connection.data_received(chunk)
        output.flush()
    return b"".join(transport.written)


@given(st.lists(st.integers(min_value=1, max_value=300), max_size=40))
def test_frames_split_anywhere_across_reads_are_answered_alike(cuts: list[int]) -> None:
    stream = _stream()
    whole = _written([stream])
    begun = composite(
        "begin",
        remote_channel=UShort(1),
        next_outgoing_id=UInt(0),
        incoming_window=UInt(1 << 20),
        outgoing_window=UInt(1 << 20),
        handle_max=UInt(0xFFFF),
    )
    assert whole.startswith(AMQP_HEADER)
    assert encode_frame(1, begun) in whole  # the stream was served
    chunks, offset = [], 0
    for size in cuts:
        chunks.append(stream[offset : offset + size])
        offset += size
    chunks.append(stream[offset:])
    assert _written([chunk for chunk in chunks if chunk]) == whole
    assert _written([stream[i : i + 1] for i in range(len(stream))]) == whole


def test_lock_tokens_are_random_version_4_uuids_that_keep_their_delivery_tag() -> None:
    tokens = [new_lock_token() for _ in range(600)]  # past a block of entropy (256 tokens)
    assert len(set(tokens)) == len(tokens)
    for token in tokens:
        assert (token.version, token.variant) == (4, uuid.RFC_4122)
        assert token.delivery_tag == token.bytes_le
        plain = uuid.UUID(bytes_le=token.delivery_tag)  # what the SDK or a management request gives
        assert plain == token
        locks: dict[uuid.UUID, str] = {token: "locked"}
        assert locks[plain] == "locked"
    assert encode(tokens[0]) == encode(uuid.UUID(int=tokens[0].int))
