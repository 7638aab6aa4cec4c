"""Pure policy: intake limits, inline decision, read authorization and backoff."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from claimcheck.errors import (
    EmptyPayload,
    ForbiddenContentType,
    IntakeRejected,
    InvalidClassification,
    MissingTenant,
    PayloadTooLarge,
    UnknownPurpose,
)
from claimcheck.outcome import compute_backoff
from claimcheck.policy import (
    DEFAULT_PURPOSES,
    Classification,
    ReadRequest,
    RecordFacts,
    Verdict,
    authorize,
    check_intake,
    travels_inline,
)
from claimcheck.refs import is_well_formed_ref, new_payload_ref
from claimcheck.states import PayloadState
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def intake(**changes: Any) -> None:
    values: dict[str, Any] = {
        "tenant_id": "t",
        "purpose": "contract-review",
        "classification": "internal",
        "content_type": "text/plain",
        "declared_length": 10,
        "max_payload_bytes": 100,
    }
    values.update(changes)
    check_intake(DEFAULT_PURPOSES, **values)


@pytest.mark.parametrize(
    ("changes", "error", "status"),
    [
        ({"tenant_id": " "}, MissingTenant, 400),
        ({"purpose": "poetry"}, UnknownPurpose, 400),
        ({"classification": "secret"}, InvalidClassification, 400),
        ({"content_type": "image/png"}, ForbiddenContentType, 415),
        ({"declared_length": 0}, EmptyPayload, 400),
        ({"declared_length": 101}, PayloadTooLarge, 413),
        ({"purpose": "bulk-ingest", "classification": "restricted"}, InvalidClassification, 400),
    ],
)
def test_intake_rejections_have_a_code_and_status(
    changes: dict[str, Any], error: type[IntakeRejected], status: int
) -> None:
    """Each intake rule raises its own IntakeRejected leaf with a code and an HTTP status."""
    with pytest.raises(error) as caught:
        intake(**changes)
    assert caught.value.http_status == status
    assert caught.value.code


def test_content_type_parameters_do_not_matter() -> None:
    """text/plain; charset=utf-8 is accepted where text/plain is."""
    intake(content_type="Text/Plain; charset=utf-8")


def test_sensitive_classes_never_travel_inline() -> None:
    """Confidential and restricted payloads go by reference whatever their size."""
    assert not travels_inline(Classification.RESTRICTED, 1, 1000)
    assert travels_inline(Classification.INTERNAL, 1000, 1000)
    assert not travels_inline(Classification.INTERNAL, 1001, 1000)


def _request() -> ReadRequest:
    return ReadRequest(
        identity="claimcheck-consumer",
        work_item_id="wi-1",
        tenant_id="a",
        purpose="contract-review",
        environment="test",
        classification="confidential",
        version=1,
        content_type="text/plain",
        expires_at=NOW + timedelta(hours=1),
        now=NOW,
    )


def _record() -> RecordFacts:
    return RecordFacts(
        work_item_id="wi-1",
        tenant_id="a",
        purpose="contract-review",
        environment="test",
        classification="confidential",
        version=1,
        content_type="text/plain",
        expires_at=NOW + timedelta(hours=1),
        state=PayloadState.AVAILABLE,
    )


def test_matching_request_is_allowed() -> None:
    """The owner tenant, purpose and environment with the right version may read."""
    assert authorize(_request(), _record(), DEFAULT_PURPOSES)[0] is Verdict.ALLOW


def test_other_tenant_looks_exactly_like_unknown() -> None:
    """Another tenant's (or work item's) record, or a reader the purpose does not allow, yields the
    same verdict and reason as no record at all."""
    unknown = authorize(_request(), None, DEFAULT_PURPOSES)
    other_tenant = authorize(_request(), replace(_record(), tenant_id="b"), DEFAULT_PURPOSES)
    other_env = authorize(_request(), replace(_record(), environment="prod"), DEFAULT_PURPOSES)
    stranger = authorize(replace(_request(), identity="someone"), _record(), DEFAULT_PURPOSES)
    other_work_item = authorize(_request(), replace(_record(), work_item_id="wi-2"), DEFAULT_PURPOSES)
    other_version = authorize(replace(_request(), version=2), _record(), DEFAULT_PURPOSES)
    assert unknown == other_tenant == other_env == stranger == other_work_item == other_version
    assert unknown[0] is Verdict.UNRESOLVABLE


@pytest.mark.parametrize(
    ("request_change", "record_change", "verdict"),
    [
        ({"now": NOW + timedelta(hours=2)}, {}, Verdict.EXPIRED),
        ({"content_type": "application/pdf"}, {}, Verdict.CONTENT_TYPE_MISMATCH),
        ({"classification": "public"}, {}, Verdict.BLOCKED),
        ({}, {"state": PayloadState.PREPARING}, Verdict.NOT_YET_VISIBLE),
        ({}, {"state": PayloadState.REMOVED}, Verdict.GONE),
        ({}, {"state": PayloadState.INTEGRITY_FAILED}, Verdict.BLOCKED),
    ],
)
def test_denials_name_their_reason(
    request_change: dict[str, Any], record_change: dict[str, Any], verdict: Verdict
) -> None:
    """Expiry, type, classification and state each produce their own verdict."""
    result = authorize(
        replace(_request(), **request_change), replace(_record(), **record_change), DEFAULT_PURPOSES
    )
    assert result[0] is verdict


def test_references_are_opaque_and_unique() -> None:
    """References are well-formed, URL-safe, unique, and contain nothing but the random part."""
    refs = {new_payload_ref() for _ in range(1000)}
    assert len(refs) == 1000
    assert all(is_well_formed_ref(ref) and len(ref) >= 4 + 22 for ref in refs)
    assert not is_well_formed_ref("ref_tenant-a/contract.pdf")


@given(st.integers(min_value=1, max_value=10_000))
def test_backoff_grows_and_is_capped(attempt: int) -> None:
    """The delay without jitter is base*factor^(n-1) capped at max; jitter stays within [d/2, d]."""
    cap = timedelta(seconds=60)
    exact = compute_backoff(attempt, base=timedelta(seconds=1), factor=2, jitter=False, max_backoff=cap)
    assert exact == timedelta(seconds=min(60, 2 ** min(attempt - 1, 64)))
    jittered = compute_backoff(attempt, base=timedelta(seconds=1), factor=2, jitter=True, max_backoff=cap)
    assert exact / 2 <= jittered <= exact


def test_backoff_rejects_attempt_zero() -> None:
    """Attempts are 1-based; zero is a programming error, not a silent zero delay."""
    with pytest.raises(ValueError, match="attempt"):
        compute_backoff(0)


def test_every_denial_verdict_maps_to_a_dead_letter_error() -> None:
    """The consumer has a dead-letter error for every verdict but ALLOW, so no denial can raise KeyError."""
    from claimcheck.consumer_outcomes import DENIALS

    assert set(DENIALS) == set(Verdict) - {Verdict.ALLOW}
