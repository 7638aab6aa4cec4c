"""claimcheck.provenance: a message is accepted only as the one intake published for its version."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from claimcheck.envelope import ROUTING_PROPERTIES, parse_envelope
from claimcheck.errors import AccessDenied
from claimcheck.policy import Classification
from claimcheck.provenance import Stated, verify

from tests.unit.claimcheck.test_dead_letter_scope import ACME, ACME_RECORD


def test_the_routing_properties_are_exactly_those_the_producer_sets() -> None:
    message = ACME.envelope.to_message(
        priority="high",
        document_type="contract",
        review_required=True,
        traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    )
    assert set(message.application_properties) - {"traceparent"} == set(ROUTING_PROPERTIES)


def test_the_published_message_verifies_and_a_reformatted_body_of_it_too() -> None:
    assert verify(ACME, ACME_RECORD) == ACME_RECORD.receipts[0]
    reformatted = json.dumps(json.loads(ACME.envelope.to_json()), indent=2).encode()
    assert verify(replace(ACME, envelope=parse_envelope(reformatted)), ACME_RECORD) is not None
    # The trace context is no part of it: a replayed copy may carry another one.
    traced = replace(
        ACME, properties=dict(ACME.properties) | {"traceparent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01"}
    )
    assert verify(traced, ACME_RECORD) is not None


@pytest.mark.parametrize(
    "stated",
    [
        replace(ACME, session_id="wi-other"),
        replace(ACME, session_id=None),
        replace(ACME, properties=dict(ACME.properties) | {"tenant": "globex"}),
        replace(ACME, properties=dict(ACME.properties) | {"priority": "high"}),
        replace(ACME, properties={}),
        replace(
            ACME,
            envelope=replace(ACME.envelope, classification=Classification.PUBLIC),
        ),
        replace(ACME, envelope=replace(ACME.envelope, content_length=11)),
        replace(ACME, envelope=replace(ACME.envelope, environment="prod")),
        replace(
            ACME, envelope=replace(ACME.envelope, expires_at=ACME.envelope.expires_at.replace(year=2030))
        ),
    ],
    ids=[
        "session",
        "no-session",
        "tenant",
        "priority",
        "no-properties",
        "classification",
        "length",
        "environment",
        "expiry",
    ],
)
def test_anything_else_is_access_denied(stated: Stated) -> None:
    with pytest.raises(AccessDenied):
        verify(stated, ACME_RECORD)


def test_a_receipt_kept_before_the_digest_still_compares_its_fields() -> None:
    """Receipts written before ``message_sha256`` existed: transport, length and sha256 still decide."""
    legacy = replace(ACME_RECORD, receipts=(replace(ACME_RECORD.receipts[0], message_sha256=None),))
    assert verify(ACME, legacy) is not None
    with pytest.raises(AccessDenied):
        verify(replace(ACME, envelope=replace(ACME.envelope, content_length=11)), legacy)


def test_a_version_without_a_receipt_has_nothing_to_compare() -> None:
    """Above the confirmed version (not confirmed yet) or below it (never confirmed, or no longer kept):
    None, and admission neither runs it nor lets it finish writes (test_forged_messages)."""
    ahead = replace(ACME, envelope=replace(ACME.envelope, payload_version=2))
    assert verify(ahead, ACME_RECORD) is None
    assert verify(ahead, replace(ACME_RECORD, version=3)) is None
