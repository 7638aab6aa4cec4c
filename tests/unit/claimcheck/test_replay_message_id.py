"""The replay copy's message id is defined for every message id the SDK hands over (AMQP: string,
binary, UUID, ulong), stays within Service Bus's 128 characters and is the same on every replay."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from claimcheck.adapters.dead_letter_replay import (
    ReplayResult,
    ReplayStatus,
    optional_text,
    replay_message_id,
)

ODD_IDS: list[object] = [
    "msg-1",
    "m" * 128,
    b"\xff\xfe" * 64,  # binary, not UTF-8, 128 bytes: the SDK passes it as bytes
    b"\xff" * 20,
    uuid.UUID("6a0b0000-0000-4000-8000-0000000000c1"),
    2**64 - 1,
    "",
    None,
]
ID_NAMES = ["text", "long-text", "long-binary", "short-binary", "uuid", "ulong", "empty", "none"]


@pytest.mark.parametrize("original", ODD_IDS, ids=ID_NAMES)
def test_every_message_id_type_gives_a_short_deterministic_text_id(original: object) -> None:
    first = replay_message_id(original, 4_294_967_296)

    assert isinstance(first, str)
    assert len(first) <= 128
    assert first.endswith(".replay.4294967296")
    assert replay_message_id(original, 4_294_967_296) == first
    assert replay_message_id(original, 7) != replay_message_id(original, 8)


def test_a_short_id_is_kept_as_listed_and_a_long_one_is_its_sha256() -> None:
    assert replay_message_id("msg-1", 3) == "msg-1.replay.3"
    assert replay_message_id(uuid.UUID(int=1), 3) == "00000000-0000-0000-0000-000000000001.replay.3"
    assert replay_message_id(42, 3) == "42.replay.3"
    assert replay_message_id(None, 3) == "message.replay.3"
    assert replay_message_id("m" * 128, 3) == hashlib.sha256(b"m" * 128).hexdigest() + ".replay.3"
    binary = b"\xff\xfe" * 64
    assert replay_message_id(binary, 3) == hashlib.sha256(binary).hexdigest() + ".replay.3"
    assert replay_message_id(b"\xff", 3) == "\ufffd.replay.3"  # as the operator routes list it


@pytest.mark.parametrize("original", ODD_IDS, ids=ID_NAMES)
def test_a_replay_result_answers_json_whatever_the_original_id(original: object) -> None:
    result = ReplayResult(
        sequence_number=3,
        status=ReplayStatus.REPLAYED,
        detail="sent",
        original_message_id=optional_text(original),
        replay_message_id=replay_message_id(original, 3),
    )

    json.dumps(result.to_dict())
