"""The broker's fast paths write and read exactly what the general codec does: frames (transfer,
disposition, flow), deliveries, and the decoding of the steady state's performatives."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from servicebus_emulator.amqp_types import Described, Symbol, Timestamp, UByte, UInt
from servicebus_emulator.broker import delivery_annotations, encode_delivery
from servicebus_emulator.codec import decode_list_items, decode_value, encode, long, timestamp
from servicebus_emulator.config import QueueSettings
from servicebus_emulator.fastframes import ACCEPTED_STATE, disposition_frame, flow_frame, transfer_frame
from servicebus_emulator.frames import (
    composite,
    composite_name,
    encode_frame,
    error,
    fields_of,
    parse_frame_body,
)
from servicebus_emulator.journal import RemovalJournal, decode_marked, decode_records, encode_records
from servicebus_emulator.message import AmqpMessage, MessageFormatError
from servicebus_emulator.model import DEFERRED, Entry
from servicebus_emulator.queue import MessageQueue
from servicebus_emulator.store import Store, consecutive_runs

uints = st.integers(min_value=0, max_value=2**32 - 1)
channels = st.integers(min_value=0, max_value=0xFFFF)


@given(channels, uints, uints, st.binary(max_size=32), st.booleans(), st.booleans(), st.binary(max_size=64))
def test_transfer_frame_is_the_generic_encoding(
    channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, more: bool, payload: bytes
) -> None:
    generic = composite(
        "transfer",
        handle=UInt(handle),
        delivery_id=UInt(delivery_id),
        delivery_tag=tag,
        message_format=UInt(0),
        settled=settled,
        more=more or None,
    )
    fast = transfer_frame(channel, handle, delivery_id, tag, settled=settled, more=more, payload=payload)
    assert fast == encode_frame(channel, generic, payload)


@given(channels, st.booleans(), uints, st.one_of(st.none(), uints), st.booleans())
def test_disposition_frame_is_the_generic_encoding(
    channel: int, role: bool, first: int, last: int | None, settled: bool
) -> None:
    for state in (composite("accepted"), composite("rejected", error=error("amqp:not-found", "gone"))):
        generic = composite(
            "disposition",
            role=role,
            first=UInt(first),
            last=None if last is None else UInt(last),
            settled=settled,
            state=state,
        )
        fast = disposition_frame(
            channel, role=role, first=first, last=last, settled=settled, state=encode(state)
        )
        assert fast == encode_frame(channel, generic)
    assert encode(composite("accepted")) == ACCEPTED_STATE


@given(channels, uints, uints, uints, uints, uints, uints, st.booleans())
def test_flow_frame_is_the_generic_encoding(
    channel: int,
    incoming: int,
    window: int,
    outgoing: int,
    handle: int,
    count: int,
    credit: int,
    drain: bool,
) -> None:
    generic = composite(
        "flow",
        next_incoming_id=UInt(incoming),
        incoming_window=UInt(window),
        next_outgoing_id=UInt(outgoing),
        outgoing_window=UInt(window),
        handle=UInt(handle),
        delivery_count=UInt(count),
        link_credit=UInt(credit),
        drain=drain or None,
    )
    fast = flow_frame(
        channel,
        next_incoming_id=incoming,
        window=window,
        next_outgoing_id=outgoing,
        handle=handle,
        delivery_count=count,
        link_credit=credit,
        drain=drain,
    )
    assert fast == encode_frame(channel, generic)


def test_a_negative_credit_is_refused_not_wrapped() -> None:
    with pytest.raises(Exception, match=r"argument out of range|format requires"):
        flow_frame(
            0,
            next_incoming_id=0,
            window=1,
            next_outgoing_id=0,
            handle=0,
            delivery_count=0,
            link_credit=-1,
            drain=False,
        )


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_and_timestamp_are_the_generic_encodings(value: int) -> None:
    assert long(value) == encode(value)
    assert timestamp(value) == encode(Timestamp(value))


HOT_PERFORMATIVES = [
    composite(
        "transfer", handle=UInt(0), delivery_id=UInt(7), delivery_tag=b"t" * 16, message_format=UInt(0)
    ),
    composite(
        "transfer",
        handle=UInt(300),
        delivery_id=UInt(2**31),
        delivery_tag=b"",
        message_format=UInt(0x80013700),
        settled=True,
        more=True,
    ),
    composite("disposition", role=True, first=UInt(5), settled=True, state=composite("accepted")),
    composite(
        "disposition",
        role=True,
        first=UInt(5),
        last=UInt(400),
        settled=False,
        state=composite("rejected", error=error("com.microsoft:x", "why", {Symbol("k"): "v"})),
    ),
    composite(
        "flow",
        next_incoming_id=UInt(1),
        incoming_window=UInt(5000),
        next_outgoing_id=UInt(0),
        outgoing_window=UInt(2**20),
        handle=UInt(2),
        delivery_count=UInt(0),
        link_credit=UInt(300),
        drain=True,
        properties={Symbol("p"): 1},
    ),
    composite("flow", next_incoming_id=UInt(1), incoming_window=UInt(5000)),
]


@pytest.mark.parametrize("performative", HOT_PERFORMATIVES, ids=lambda p: str(composite_name(p)))
def test_hot_performatives_decode_as_the_generic_path(performative: Described) -> None:
    body = memoryview(encode_frame(0, performative, b"payload")[8:])
    generic, end = decode_value(body, 0)
    name, fields, payload = parse_frame_body(body)
    assert name == composite_name(generic)
    assert fields == fields_of(generic)
    assert [type(value) for value in fields.values()] == [
        type(value) for value in fields_of(generic).values()
    ]
    assert bytes(payload) == bytes(body[end:]) == b"payload"
    for cut in range(1, len(body) - len(b"payload")):
        with pytest.raises(ValueError, match=r"truncated|malformed|past the end"):  # Frame/DecodeError
            parse_frame_body(body[:cut])


def _entry(message: AmqpMessage, **fields: Any) -> Entry:
    return Entry(seq=fields.pop("seq", 42), message=message, enqueued_ms=1_700_000_000_000, **fields)


@pytest.mark.parametrize(
    ("header", "annotations"),
    [
        ({}, {}),
        ({"durable": True, "priority": UByte(4), "ttl": UInt(60_000)}, {Symbol("x-opt-partition-key"): "p"}),
        ({}, {Symbol("x-opt-sequence-number"): 7}),  # a key the broker sets: the general path
    ],
)
@pytest.mark.parametrize("seq", [1, 127, 128, 10**12])
@pytest.mark.parametrize("locked", [False, True])
def test_a_delivery_is_the_generic_encoding(
    header: dict[str, Any], annotations: dict[Any, Any], seq: int, locked: bool
) -> None:
    queue = MessageQueue("q", "q", QueueSettings(), router=None)  # type: ignore[arg-type]
    message = AmqpMessage(
        header=dict(header),
        annotations=dict(annotations),
        properties={"message_id": "m"},
        body=b"\x00\x53\x75\xa0\x01x",
    )
    entry = _entry(message, seq=seq, delivery_count=3, lock_token=uuid.uuid4() if locked else None)
    entry.locked_until_ms = 1_700_000_060_000
    expected = message.encode(delivery_count=2, annotations=delivery_annotations(entry, queue))
    assert encode_delivery(entry, queue) == expected
    deferred = _entry(message.copy(), seq=seq, state=DEFERRED, dead_letter_source="q")
    assert encode_delivery(deferred, queue) == message.encode(
        delivery_count=0, annotations=delivery_annotations(deferred, queue)
    )


def test_removed_messages_stay_gone_across_a_restart_before_and_after_the_purge(tmp_path: Path) -> None:
    message = AmqpMessage(properties={"message_id": "m"}, body=b"\x00\x53\x75\xa0\x01x")
    journal = tmp_path / "removals.map"
    store = Store(tmp_path)
    for seq in (1, 2, 3, 4):
        store.put("q", _entry(message, seq=seq))
    store.commit()
    store.remove("q", 2)
    store.commit()  # a removal alone: one record in the mapped journal, in the file at once
    assert decode_marked(journal.read_bytes()) == ([("q", 2)], len(encode_records([("q", 2)])) + 1)
    store.remove("q", 4)
    store.put("q", _entry(message, seq=5))
    store.commit()  # with another write: a row of the same transaction
    assert decode_marked(journal.read_bytes())[0] == [("q", 2)]
    assert store.removed_backlog == 2
    end = decode_marked(journal.read_bytes())[1]
    store._db.close()  # as in a crash: the removals are recorded, not yet purged
    store._journal.close()
    with journal.open("r+b") as torn:  # a record whose marker the crash kept from being written
        torn.seek(end)
        torn.write(encode_records([("q", 3)]))
    reopened = Store(tmp_path)
    assert [entry.seq for entry in reopened.entries("q")] == [1, 3, 5]
    assert decode_marked(journal.read_bytes()) == ([], 0)  # applied, then emptied
    assert set(journal.read_bytes()) == {0}
    reopened.remove("q", 1)
    reopened.commit()
    reopened.purge_removed()
    assert reopened.removed_backlog == 0
    assert [entry.seq for entry in reopened.entries("q")] == [3, 5]
    reopened.close()


def test_the_appended_journal_of_earlier_versions_is_applied_then_deleted(tmp_path: Path) -> None:
    message = AmqpMessage(properties={"message_id": "m"}, body=b"\x00\x53\x75\xa0\x01x")
    store = Store(tmp_path)
    for seq in (1, 2, 3):
        store.put("q", _entry(message, seq=seq))
    store.close()
    (tmp_path / "removed.journal").write_bytes(encode_records([("q", 1), ("q", 3)]))
    reopened = Store(tmp_path)
    assert [entry.seq for entry in reopened.entries("q")] == [2]
    assert not (tmp_path / "removed.journal").exists()
    reopened.close()


def test_the_mapped_journal_grows_past_its_first_size_and_reads_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "removals.map"
    journal = RemovalJournal(path)
    first_size = path.stat().st_size
    keys = [(f"queue-{i % 7}/subscriptions/s", i) for i in range(first_size // 30 + 100)]
    for start in range(0, len(keys), 1000):
        journal.append(keys[start : start + 1000])
    assert path.stat().st_size > first_size
    journal.close()
    reopened = RemovalJournal(path)
    assert reopened.pending == keys
    reopened.clear()
    assert reopened.pending == []
    reopened.close()
    assert RemovalJournal(path).pending == []


def test_journal_records_round_trip_any_entity_path() -> None:
    keys = [("q", 1), ("topic/subscriptions/sub\n\x00é", 2**63), ("", 0)]
    data = encode_records(keys)
    assert decode_records(data) == keys
    assert decode_records(data[:-1]) == keys[:-1]


def test_the_purge_deletes_exactly_the_removed_messages_in_runs(tmp_path: Path) -> None:
    message = AmqpMessage(properties={"message_id": "m"}, body=b"\x00\x53\x75\xa0\x01x")
    store = Store(tmp_path)
    for queue, seqs in (("q", range(1, 8)), ("r", range(1, 4))):
        for seq in seqs:
            store.put(queue, _entry(message, seq=seq))
    store.commit()
    for queue, seq in (("q", 2), ("q", 3), ("q", 4), ("q", 6), ("r", 1), ("q", 3)):
        store.remove(queue, seq)  # q 3 twice: a duplicate row changes nothing
    store.purge_removed()
    assert [entry.seq for entry in store.entries("q")] == [1, 5, 7]
    assert [entry.seq for entry in store.entries("r")] == [2, 3]
    assert consecutive_runs([("q", 2), ("q", 3), ("q", 3), ("q", 4), ("q", 6), ("r", 7)]) == [
        ("q", 2, 4),
        ("q", 6, 6),
        ("r", 7, 7),
    ]
    store.close()


def test_a_data_directory_of_the_one_table_layout_is_moved_over(tmp_path: Path) -> None:
    raw = AmqpMessage(properties={"message_id": "old"}, body=b"\x00\x53\x75\xa0\x01x").encode()
    tmp_path.mkdir(exist_ok=True)
    db = sqlite3.connect(tmp_path / "servicebus.sqlite")
    db.execute(
        "CREATE TABLE messages (queue TEXT NOT NULL, seq INTEGER NOT NULL, state INTEGER NOT NULL, "
        "delivery_count INTEGER NOT NULL, enqueued_ms INTEGER NOT NULL, expires_ms INTEGER, "
        "scheduled_ms INTEGER, session_id TEXT, dead_letter_source TEXT, raw BLOB NOT NULL, "
        "PRIMARY KEY (queue, seq)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO messages VALUES ('q', 9, 0, 2, 1, NULL, NULL, 's', NULL, ?)", (raw,))
    db.commit()
    db.close()
    store = Store(tmp_path)
    (entry,) = store.entries("q")
    assert (entry.seq, entry.delivery_count, entry.session_id, entry.message.message_id) == (9, 2, "s", "old")
    store.close()


field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=0, max_value=2**32 - 1).map(UInt),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(Timestamp),
    st.text(max_size=300),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20).map(Symbol),
    st.binary(max_size=300),
    st.uuids(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from(
        [composite("accepted"), composite("released"), composite("modified", undeliverable_here=True)]
    ),
)


@given(st.lists(field_values, max_size=13))
def test_list_items_decode_as_the_generic_path(values: list[Any]) -> None:
    encoded = memoryview(encode(values))
    generic, end = decode_value(encoded, 0)
    if not values:
        return  # the empty list has its own constructor (0x45), never read item by item
    header = 3 if encoded[0] == 0xC0 else 9  # list8: size, count (a byte each); list32: 4 bytes each
    items, off = decode_list_items(encoded, header, len(values))
    assert (items, off) == (generic, end)
    assert [type(item) for item in items] == [type(item) for item in generic]
    with pytest.raises(ValueError, match=r"truncated|malformed|past the end|16-char"):  # as decode_value
        decode_list_items(encoded[: end - 1], header, len(values))


@given(
    st.dictionaries(
        st.sampled_from(["message_id", "subject", "to", "group_id", "content_type"]), st.text(max_size=40)
    )
)
def test_a_parsed_message_keeps_its_properties_and_body(properties: dict[str, Any]) -> None:
    body = b"\x00\x53\x75\xb0" + (300).to_bytes(4, "big") + b"b" * 300
    raw = AmqpMessage(header={"ttl": UInt(5)}, properties=dict(properties), body=body).encode()
    parsed = AmqpMessage.parse(raw)
    assert (parsed.header, parsed.properties, parsed.body) == ({"ttl": UInt(5)}, properties, body)
    for cut in range(len(raw) - len(body) + 1, len(raw), 7):  # inside the data section
        with pytest.raises(MessageFormatError):
            AmqpMessage.parse(raw[:cut])


def test_without_posix_fallocate_the_journal_writes_its_zeros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "posix_fallocate", raising=False)  # as on macOS
    path = tmp_path / "removals.map"
    journal = RemovalJournal(path)
    assert path.stat().st_size > 0
    assert path.stat().st_blocks * 512 >= path.stat().st_size  # written, not a sparse file
    journal.append([("q", 1)])
    journal.close()
    assert RemovalJournal(path).pending == [("q", 1)]
