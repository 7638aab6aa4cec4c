"""Envelope v1: strict parsing, validation, size bound and deterministic identity."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from claimcheck.envelope import (
    MAX_REFERENCE_ENVELOPE_BYTES,
    Checksum,
    Envelope,
    message_id_for,
    parse_envelope,
)
from claimcheck.errors import InvalidEnvelope, UnsupportedSchemaVersion
from claimcheck.policy import Classification
from claimcheck.refs import new_payload_ref
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def make_envelope(**overrides: Any) -> Envelope:
    values: dict[str, Any] = {
        "work_item_id": "wi-1",
        "payload_ref": new_payload_ref(),
        "payload_inline": None,
        "payload_version": 1,
        "content_type": "text/plain",
        "content_length": 10,
        "checksum": Checksum("sha256", "a" * 64),
        "classification": Classification.CONFIDENTIAL,
        "tenant_id": "tenant-a",
        "purpose": "contract-review",
        "environment": "test",
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
        "correlation_id": "corr-1",
    }
    values.update(overrides)
    return Envelope(**values)


def body_with(**changes: Any) -> bytes:
    document = json.loads(make_envelope().to_json())
    for key, value in changes.items():
        if value is _DELETE:
            del document[key]
        else:
            document[key] = value
    return json.dumps(document).encode()


_DELETE = object()


def test_round_trip_keeps_every_field() -> None:
    """An envelope serialized and parsed back is equal to the original."""
    original = make_envelope()
    assert parse_envelope(original.to_json()) == original


def test_inline_round_trip_carries_the_bytes() -> None:
    """An inline envelope carries the payload (base64) and no reference."""
    original = make_envelope(
        payload_ref=None,
        payload_inline=b"small text",
        content_length=10,
        classification=Classification.PUBLIC,
    )
    parsed = parse_envelope(original.to_json())
    assert parsed.payload_inline == b"small text"
    assert parsed.payload_ref is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"work_item_id": _DELETE}, "work_item_id"),
        ({"payload_version": "1"}, "payload_version"),
        ({"payload_version": True}, "payload_version"),
        ({"content_length": 0}, "content_length"),
        ({"content_length": -5}, "content_length"),
        ({"checksum": {"algorithm": "md5", "value": "a" * 64}}, "checksum.algorithm"),
        ({"checksum": {"algorithm": "sha256", "value": "xyz"}}, "checksum.value"),
        ({"payload_ref": "tenant-a/contract.pdf"}, "payload_ref"),
        ({"expires_at": "2025-12-31T00:00:00Z"}, "expires_at"),
        ({"created_at": "2026-01-01T00:00:00"}, "created_at"),
        ({"classification": "top-secret"}, "classification"),
        ({"surprise": 1}, "surprise"),
        ({"schema": "other"}, "schema"),
        ({"payload_inline": "aGk="}, "payload_ref"),
    ],
)
def test_invalid_field_is_named(changes: dict[str, Any], field: str) -> None:
    """Each kind of bad field raises InvalidEnvelope naming that field."""
    with pytest.raises(InvalidEnvelope) as caught:
        parse_envelope(body_with(**changes))
    assert caught.value.field == field


def test_unknown_major_version_is_unsupported() -> None:
    """A body from schema major 2 is refused as an unsupported version, not as invalid."""
    with pytest.raises(UnsupportedSchemaVersion):
        parse_envelope(body_with(schema_version="2.0"))


def test_newer_minor_may_add_fields() -> None:
    """A newer minor version may carry fields this consumer ignores."""
    assert parse_envelope(body_with(schema_version="1.3", hint="x")).work_item_id == "wi-1"


def test_duplicate_keys_are_refused() -> None:
    """A JSON object with a repeated key is not an envelope (no silent last-wins)."""
    body = make_envelope().to_json()[:-1] + b',"tenant_id":"tenant-b"}'
    with pytest.raises(InvalidEnvelope) as caught:
        parse_envelope(body)
    assert caught.value.field == "tenant_id"


def test_reference_envelope_with_longest_fields_fits_in_one_kib() -> None:
    """A by-reference envelope with every field at its maximum length stays within 1 KiB."""
    longest = make_envelope(
        work_item_id="w" * 64,
        tenant_id="t" * 64,
        purpose="p" * 64,
        environment="e" * 64,
        correlation_id="c" * 64,
        content_type="x" * 100,
        content_length=2**40,
        payload_version=10**6,
    )
    assert len(longest.to_json()) <= MAX_REFERENCE_ENVELOPE_BYTES


def test_message_id_is_deterministic_per_work_item_version_and_purpose() -> None:
    """The same (work item, version, purpose) gives the same message id; any change gives another."""
    assert message_id_for("wi", 1, "p") == message_id_for("wi", 1, "p")
    ids = {message_id_for("wi", 1, "p"), message_id_for("wi", 2, "p"), message_id_for("wi", 1, "q")}
    assert len(ids) == 3


def test_routing_values_are_application_properties() -> None:
    """The queue message carries routing values as properties and the work item as session id."""
    message = make_envelope().to_message(
        priority="high",
        document_type="contract",
        review_required=True,
        traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    )
    assert message.application_properties["priority"] == "high"
    assert message.application_properties["review_required"] is True
    assert message.application_properties["schema"] == "claimcheck.envelope/1"
    assert str(message.application_properties["traceparent"]).startswith("00-")
    assert message.session_id == "wi-1"
    assert b"payload_inline" not in message.body


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash_the_parser(body: bytes) -> None:
    """Any body either parses or raises one of the two envelope errors, nothing else."""
    with contextlib.suppress(InvalidEnvelope, UnsupportedSchemaVersion):
        parse_envelope(body)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(st.sampled_from(sorted(json.loads(make_envelope().to_json()))), _json_values)
def test_mutating_one_field_either_parses_or_names_an_error(field: str, value: object) -> None:
    """Replacing any one field with any JSON value yields a valid envelope or a typed error."""
    document = json.loads(make_envelope().to_json())
    document[field] = value
    outcome: str
    try:
        parsed = parse_envelope(json.dumps(document).encode())
        outcome = "valid" if parsed.payload_version >= 1 and parsed.content_length >= 1 else "bad"
    except InvalidEnvelope as error:
        outcome = "named" if error.field else "unnamed"
    except UnsupportedSchemaVersion:
        outcome = "named" if field == "schema_version" else "unexpected"
    assert outcome in {"valid", "named"}
