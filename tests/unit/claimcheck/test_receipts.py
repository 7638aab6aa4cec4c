"""Receipts are typed end to end; dictionaries only at the JSON edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from claimcheck.receipts import IntakeReceipt, WriteReceipt

ACCEPTED = datetime(2026, 12, 1, 8, 0, 0, 123000, tzinfo=UTC)
KEPT = WriteReceipt(
    work_item_id="wi-1",
    version=2,
    transport="reference",
    payload_ref="ref_abc",
    object_etag='"0x1"',
    request_id="req",
    message_id="env-1",
    accepted_at=ACCEPTED,
    visibility_deadline=ACCEPTED + timedelta(seconds=30),
    content_length=42,
    sha256="a" * 64,
)


def test_a_kept_receipt_round_trips_through_its_json_form() -> None:
    assert WriteReceipt.from_dict(KEPT.to_dict()) == KEPT
    assert "record_etag" not in KEPT.to_dict()
    assert KEPT.to_dict()["accepted_at"] == "2026-12-01T08:00:00.123Z"


def test_the_intake_receipt_adds_the_confirming_row_etag_in_its_place() -> None:
    answered = IntakeReceipt.confirmed(KEPT, record_etag='W/"row"')
    assert IntakeReceipt.from_dict(answered.to_dict()) == answered
    assert list(answered.to_dict())[:6] == [
        "work_item_id",
        "version",
        "transport",
        "payload_ref",
        "object_etag",
        "record_etag",
    ]
    assert answered.to_dict() == {**KEPT.to_dict(), "record_etag": 'W/"row"'}
