"""The status API's read-after-write decision (claimcheck.final_states): every row of its table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from claimcheck.final_states import FinalAnswer, VersionFacts, decide
from claimcheck.receipts import WriteReceipt

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = timedelta(seconds=30)


def facts(
    confirmed: int,
    pending: int | None = None,
    *,
    reserved_ago: float = 1.0,
    state: str = "completed",
    payload: str | None = "processed",
    shas: tuple[str, ...] = (),
) -> VersionFacts:
    receipts = [
        WriteReceipt(
            work_item_id="wi-1",
            version=number,
            transport="reference",
            payload_ref=f"ref_{number}",
            object_etag="etag",
            request_id="request",
            message_id=f"env-{number}",
            accepted_at=NOW,
            visibility_deadline=NOW + WINDOW,
            content_length=1,
            sha256=sha,
        )
        for number, sha in enumerate(shas, start=1)
    ]
    return VersionFacts(
        confirmed_version=confirmed,
        pending_version=confirmed if pending is None else pending,
        reserved_at=NOW - timedelta(seconds=reserved_ago),
        processing_state=state,
        payload_state=payload,
        receipts=receipts,
    )


@pytest.mark.parametrize(
    ("given", "min_version", "expected"),
    [
        (None, 1, FinalAnswer("unknown_version", "stop")),
        (facts(1), 2, FinalAnswer("unknown_version", "stop")),
        (facts(1, 2, reserved_ago=1), 2, FinalAnswer("awaiting_visibility", "wait", 5)),
        (facts(1, 2, reserved_ago=28.5), 2, FinalAnswer("awaiting_visibility", "wait", 2)),
        (facts(1, 2, reserved_ago=31), 2, FinalAnswer("propagation_exceeded", "reconcile")),
        (facts(2, shas=("a", "b")), 1, FinalAnswer("conflict_detected", "re_read")),
        (facts(2, shas=("a", "a")), 1, FinalAnswer("version_confirmed", "proceed")),
        (facts(1, shas=("a",)), 1, FinalAnswer("version_confirmed", "proceed")),
        (facts(1, state="running", payload="available"), 1, FinalAnswer("version_confirmed", "wait", 2)),
        (facts(1, state="failed"), 1, FinalAnswer("needs_reconciliation", "reconcile")),
        (facts(1, state="expired"), 1, FinalAnswer("needs_reconciliation", "reconcile")),
        (facts(1, state="running", payload="missing"), 1, FinalAnswer("needs_reconciliation", "reconcile")),
        (facts(1), None, FinalAnswer("version_confirmed", "proceed")),
        # "At least version 0" asks for no particular version: no version 0 was written to be replaced.
        (facts(1, shas=("a",)), 0, FinalAnswer("version_confirmed", "proceed")),
        (facts(2, shas=("a", "b")), 0, FinalAnswer("version_confirmed", "proceed")),
    ],
)
def test_decide(given: VersionFacts | None, min_version: int | None, expected: FinalAnswer) -> None:
    assert decide(given, min_version, now=NOW, window=WINDOW) == expected


def test_only_unknown_version_is_a_404() -> None:
    assert FinalAnswer("unknown_version", "stop").http_status == 404
    assert FinalAnswer("propagation_exceeded", "reconcile").http_status == 200


@pytest.mark.parametrize(
    ("given", "min_version", "expected"),
    [
        # A cached row proves "at least N" (versions only grow) ...
        (facts(2), 2, FinalAnswer("version_confirmed", "proceed")),
        (facts(2, shas=("a", "a")), 1, FinalAnswer("version_confirmed", "proceed")),
        # ... but never the latest, nor that N is unknown, awaited or late: re-read.
        (facts(1), None, FinalAnswer("awaiting_visibility", "re_read")),
        (facts(1), 2, FinalAnswer("awaiting_visibility", "re_read")),
        (facts(1, 2, reserved_ago=1), 2, FinalAnswer("awaiting_visibility", "re_read")),
        (facts(1, 2, reserved_ago=31), 2, FinalAnswer("awaiting_visibility", "re_read")),
    ],
)
def test_a_non_authoritative_read_never_confirms_an_old_version_as_current(
    given: VersionFacts, min_version: int | None, expected: FinalAnswer
) -> None:
    cached = VersionFacts(**{**given.__dict__, "authoritative": False})
    assert decide(cached, min_version, now=NOW, window=WINDOW) == expected
