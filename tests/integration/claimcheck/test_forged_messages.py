"""The queue is untrusted input (issue 26), on Azurite: a forged message ends dead-lettered with a reason
and changes nothing: every table row (ETags and timestamps included), every stored object, every result
event and every status answer is byte-identical before and after, and the message is attributed to no
work item (so no tenant's operator would see it).

One scene serves every case (the forgeries change nothing, which each case proves): a confidential
by-reference work item dead-lettered processing_failed (``failed``), one completed (``done``), one queued
(``queued``), an inline one queued (``inline``), and another tenant's queued one (``other``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from claimcheck import Complete, DeadLetter, DeadLetterReason, InboundMessage
from claimcheck.analysis import AnalysisError
from claimcheck.envelope import parse_envelope
from claimcheck.provenance import Stated, attributed
from claimcheck.refs import new_payload_ref
from claimcheck.testing import consume_and_settle
from claimcheck.timestamps import format_timestamp

from tests.integration.claimcheck.conftest import Harness, build_harness, document
from tests.integration.claimcheck.test_consumer import submit

OTHER_TENANT = "tenant-b"
INVENTED = b"1. The Customer shall pay the Supplier EUR 1,000,000 on demand.\n"
KEEP = object()


@dataclass(frozen=True)
class Scene:
    harness: Harness
    failed: InboundMessage
    done: InboundMessage
    queued: InboundMessage
    inline: InboundMessage
    other: InboundMessage

    def work_item_ids(self) -> list[str]:
        messages = (self.failed, self.done, self.queued, self.inline, self.other)
        return [str(message.session_id) for message in messages]


def _refuse_to_analyze() -> None:
    raise AnalysisError("the stand-in analyzer refuses this document")


@pytest.fixture(scope="module")
def scene(storage_connection_string: str) -> Scene:
    harness = build_harness(storage_connection_string)
    submit(harness, document(40_000, marker="DOC-X"), work_item_id=f"wi-x-{uuid.uuid4().hex[:8]}")
    failed = harness.delivery()
    harness.analyzer.before = _refuse_to_analyze
    refused = consume_and_settle(harness.claimcheck.consumer, failed)
    assert isinstance(refused, DeadLetter)
    assert refused.reason is DeadLetterReason.PROCESSING_FAILED
    harness.analyzer.before = None
    submit(harness, document(30_000, marker="DOC-C"))
    done = harness.delivery()
    assert consume_and_settle(harness.claimcheck.consumer, done) == Complete()
    submit(harness, document(20_000, marker="DOC-Q"))
    queued = harness.delivery()
    submit(harness, b"A short internal note. " * 4, classification="internal")
    inline = harness.delivery()
    submit(harness, document(20_000, marker="DOC-W"), tenant_id=OTHER_TENANT)
    other = harness.delivery()
    return Scene(harness, failed, done, queued, inline, other)


def snapshot(scene: Scene) -> str:
    """Everything a forged message could change, as one text: the rows of every table of the harness
    (with their ETags and timestamps), the stored objects, the result events, each status answer."""
    harness = scene.harness
    suffix = harness.settings.registry_table.removeprefix("registry")
    tables = sorted(table.name for table in harness.tables.list_tables() if table.name.endswith(suffix))
    rows = {
        name: sorted(
            (
                dict(row) | {"etag": row.metadata["etag"]}
                for row in harness.tables.get_table_client(name).list_entities()
            ),
            key=lambda row: (row["PartitionKey"], row["RowKey"]),
        )
        for name in tables
    }
    status = harness.claimcheck.status
    views = {}
    for work_item_id in scene.work_item_ids():
        view = status.get(work_item_id, min_version=1)
        views[work_item_id] = None if view is None else view.to_dict()
    events = [
        (event.message_id, event.body.decode(), dict(event.application_properties))
        for event in harness.results()
    ]
    state = {"rows": rows, "blobs": sorted(harness.blob_names()), "events": events, "views": views}
    return json.dumps(state, sort_keys=True, default=str)


def forge(
    message: InboundMessage,
    *,
    session: object = KEEP,
    properties: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    **fields: object,
) -> InboundMessage:
    """``message`` as a hostile sender re-sends it: envelope fields replaced or dropped, another session
    id or other properties; everything it does not change is copied."""
    body = json.loads(message.body)
    body.update(fields)
    for name in drop:
        body.pop(name)
    return InboundMessage(
        body=json.dumps(body).encode(),
        message_id=f"forged-{uuid.uuid4().hex[:12]}",
        delivery_count=1,
        session_id=message.session_id if session is KEEP else session,  # type: ignore[arg-type]
        application_properties=dict(message.application_properties) if properties is None else properties,
    )


def _moved(message: InboundMessage, name: str, delta: timedelta) -> str:
    return format_timestamp(datetime.fromisoformat(json.loads(message.body)[name]) + delta)


def _invented(message: InboundMessage, **more: Any) -> InboundMessage:
    """The invented clause inline, with its true length and sha256 (so every integrity check passes)."""
    return forge(
        message,
        drop=("payload_ref",) if b"payload_ref" in message.body else (),
        payload_inline=base64.b64encode(INVENTED).decode(),
        content_length=len(INVENTED),
        checksum={"algorithm": "sha256", "value": hashlib.sha256(INVENTED).hexdigest()},
        **more,
    )


def _properties(message: InboundMessage, **changes: object) -> dict[str, Any]:
    return dict(message.application_properties) | changes


Forgery = Callable[[Scene], InboundMessage]
DENIED = DeadLetterReason.ACCESS_DENIED


def _envelope_cases(kind: str) -> list[tuple[str, Forgery, DeadLetterReason]]:
    """Each envelope field altered on the queued by-reference (``queued``) or inline (``inline``) message."""

    def of(scene: Scene) -> InboundMessage:
        return getattr(scene, kind)  # type: ignore[no-any-return]

    day = timedelta(hours=25)
    cases: list[tuple[str, Forgery, DeadLetterReason]] = [
        (
            "another-tenants-work-item",
            lambda s: forge(of(s), work_item_id=s.other.session_id, session=s.other.session_id),
            DENIED,
        ),
        (
            "another-work-item",
            lambda s: forge(of(s), work_item_id=s.done.session_id, session=s.done.session_id),
            DENIED,
        ),
        (
            "version",
            lambda s: forge(
                of(s), payload_version=2, created_at=_moved(of(s), "created_at", -timedelta(hours=1))
            ),
            DENIED if kind == "queued" else DeadLetterReason.PAYLOAD_MISSING,
        ),
        ("tenant", lambda s: forge(of(s), tenant_id=OTHER_TENANT), DENIED),
        ("purpose", lambda s: forge(of(s), purpose="bulk-ingest"), DENIED),
        ("classification", lambda s: forge(of(s), classification="public"), DENIED),
        ("content-type", lambda s: forge(of(s), content_type="application/pdf"), DENIED),
        (
            "length",
            lambda s: forge(of(s), content_length=json.loads(of(s).body)["content_length"] + 1),
            DENIED,
        ),
        ("checksum", lambda s: forge(of(s), checksum={"algorithm": "sha256", "value": "0" * 64}), DENIED),
        ("environment", lambda s: forge(of(s), environment="prod"), DENIED),
        ("correlation-id", lambda s: forge(of(s), correlation_id="c-forged"), DENIED),
        # Forgery 3 of the issue: a copy moved back 25 h, so that it is expired.
        (
            "expiry-moved-back",
            lambda s: forge(
                of(s),
                created_at=_moved(of(s), "created_at", -day),
                expires_at=_moved(of(s), "expires_at", -day),
            ),
            DENIED,
        ),
        ("expiry-extended", lambda s: forge(of(s), expires_at=_moved(of(s), "expires_at", day)), DENIED),
        ("payload-invented", _invented_of(kind), DENIED),
    ]
    if kind == "queued":
        cases += [
            ("unknown-ref", lambda s: forge(of(s), payload_ref=new_payload_ref()), DENIED),
            (
                "another-work-items-ref",
                lambda s: forge(of(s), payload_ref=json.loads(s.done.body)["payload_ref"]),
                DENIED,
            ),
        ]
    return [(f"{kind}-{name}", forgery, reason) for name, forgery, reason in cases]


def _invented_of(kind: str) -> Forgery:
    return lambda scene: _invented(getattr(scene, kind))


def _message_cases(kind: str) -> list[tuple[str, Forgery, DeadLetterReason]]:
    """The genuine envelope of ``kind`` under another session id or with other properties."""

    def of(scene: Scene) -> InboundMessage:
        return getattr(scene, kind)  # type: ignore[no-any-return]

    cases: list[tuple[str, Forgery, DeadLetterReason]] = [
        ("session-of-another-tenants-work-item", lambda s: forge(of(s), session=s.other.session_id), DENIED),
        # Forgery 2 of the issue: another tenant's work item as session, that tenant stated.
        (
            "session-and-tenant-of-another-tenant",
            lambda s: forge(
                of(s), session=s.other.session_id, properties=_properties(of(s), tenant=OTHER_TENANT)
            ),
            DENIED,
        ),
        ("session-of-another-work-item", lambda s: forge(of(s), session=s.done.session_id), DENIED),
        ("no-session", lambda s: forge(of(s), session=None), DENIED),
        (
            "tenant-property",
            lambda s: forge(of(s), properties=_properties(of(s), tenant=OTHER_TENANT)),
            DENIED,
        ),
        (
            "purpose-property",
            lambda s: forge(of(s), properties=_properties(of(s), purpose="bulk-ingest")),
            DENIED,
        ),
        ("priority-property", lambda s: forge(of(s), properties=_properties(of(s), priority="high")), DENIED),
        (
            "review-property",
            lambda s: forge(of(s), properties=_properties(of(s), review_required=True)),
            DENIED,
        ),
        (
            "document-type-property",
            lambda s: forge(of(s), properties=_properties(of(s), document_type="forged")),
            DENIED,
        ),
        (
            "schema-property",
            lambda s: forge(of(s), properties=_properties(of(s), schema="claimcheck.envelope/9")),
            DENIED,
        ),
        ("no-properties", lambda s: forge(of(s), properties={}), DENIED),
    ]
    return [(f"{kind}-{name}", forgery, reason) for name, forgery, reason in cases]


def _nobodys(scene: Scene, *, by_reference: bool) -> InboundMessage:
    """An envelope for a work item nobody submitted, created long enough ago to be past the grace."""
    ghost = f"wi-ghost-{uuid.uuid4().hex[:8]}"
    source = scene.queued if by_reference else scene.inline
    ref: dict[str, Any] = {"payload_ref": new_payload_ref()} if by_reference else {}
    return forge(
        source,
        work_item_id=ghost,
        session=ghost,
        created_at=_moved(source, "created_at", -timedelta(hours=1)),
        **ref,
    )


CASES: list[tuple[str, Forgery, DeadLetterReason]] = [
    # Forgery 1 of the issue: the failed confidential by-reference work item's envelope made inline
    # (internal, text/plain, an invented clause with its true sha256), all else left as the victim's.
    (
        "failed-rewritten-inline",
        lambda s: _invented(s.failed, classification="internal", content_type="text/plain"),
        DENIED,
    ),
    (
        "failed-replayed-under-another-session",
        lambda s: forge(
            s.failed, session=s.other.session_id, properties=_properties(s.failed, tenant=OTHER_TENANT)
        ),
        DENIED,
    ),
    ("completed-rewritten-inline", lambda s: _invented(s.done), DENIED),
    (
        "completed-expiry-moved-back",
        lambda s: forge(
            s.done,
            expires_at=_moved(s.done, "expires_at", -timedelta(hours=25)),
            created_at=_moved(s.done, "created_at", -timedelta(hours=25)),
        ),
        DENIED,
    ),
    *_envelope_cases("queued"),
    *_envelope_cases("inline"),
    *_message_cases("queued"),
    *_message_cases("inline"),
    ("no-record-inline", lambda s: _nobodys(s, by_reference=False), DeadLetterReason.PAYLOAD_MISSING),
    ("no-record-by-reference", lambda s: _nobodys(s, by_reference=True), DENIED),
]


@pytest.mark.parametrize(("forgery", "reason"), [pytest.param(f, r, id=name) for name, f, r in CASES])
def test_a_forged_message_is_dead_lettered_and_changes_nothing(
    scene: Scene, forgery: Forgery, reason: DeadLetterReason
) -> None:
    before, analyzed = snapshot(scene), len(scene.harness.analyzer.seen)
    message = forgery(scene)
    outcome = consume_and_settle(scene.harness.claimcheck.consumer, message)
    assert isinstance(outcome, DeadLetter), outcome
    assert outcome.reason is reason, outcome.description
    assert snapshot(scene) == before
    assert len(scene.harness.analyzer.seen) == analyzed, "a forged message's bytes reached the analyzer"
    # Attributed to no work item: neither the one its envelope names nor the one its session names.
    stated = Stated(parse_envelope(message.body), message.session_id, message.application_properties)
    work_items = scene.harness.claimcheck.status
    for named in {stated.envelope.work_item_id, message.session_id}:
        record = None if named is None else work_items.record(named)
        assert not attributed(stated, record)


def test_the_genuine_messages_are_attributed_to_their_own_work_items(scene: Scene) -> None:
    """The check that refuses the forgeries accepts what intake published (else it proves nothing)."""
    status = scene.harness.claimcheck.status
    for message in (scene.failed, scene.done, scene.queued, scene.inline, scene.other):
        stated = Stated(parse_envelope(message.body), message.session_id, message.application_properties)
        assert attributed(stated, status.record(stated.envelope.work_item_id))


def test_an_expired_copy_of_a_queued_message_leaves_the_genuine_one_to_complete(
    make_harness: Callable[..., Harness],
) -> None:
    """Forgery 3 of the issue, to its end: the copy moved back 25 h is refused and the work item stays
    accepted; the genuine delivery then completes it (before the fix: the copy set it expired, and the
    genuine delivery's effect ended expired / needs_reconciliation)."""
    harness = make_harness()
    receipt = submit(harness, document(20_000))
    genuine = harness.delivery()
    day = timedelta(hours=25)
    copy = forge(
        genuine,
        created_at=_moved(genuine, "created_at", -day),
        expires_at=_moved(genuine, "expires_at", -day),
    )
    refused = consume_and_settle(harness.claimcheck.consumer, copy)
    assert isinstance(refused, DeadLetter)
    view = harness.claimcheck.status.get(receipt.work_item_id)
    assert view is not None
    assert (view.state, view.failure_reason) == ("accepted", None)
    assert consume_and_settle(harness.claimcheck.consumer, genuine) == Complete()
    view = harness.claimcheck.status.get(receipt.work_item_id, min_version=1)
    assert view is not None
    assert view.answer is not None
    assert (view.state, view.answer.next_action) == ("completed", "proceed")


def test_a_genuine_expired_message_of_a_completed_work_item_leaves_it_completed(
    make_harness: Callable[..., Harness],
) -> None:
    """The state machine decides, never a message: completed → expired is no move it allows, so a late
    genuine delivery past its expiry is dead-lettered and the completed work item stays as it is."""
    harness = make_harness()
    receipt = submit(harness, document(20_000))
    genuine = harness.delivery()
    assert consume_and_settle(harness.claimcheck.consumer, genuine) == Complete()
    before = harness.claimcheck.status.get(receipt.work_item_id, min_version=1)
    harness.clock.advance(timedelta(hours=25))
    late = consume_and_settle(harness.claimcheck.consumer, genuine)
    assert isinstance(late, DeadLetter)
    assert late.reason is DeadLetterReason.EXPIRED
    after = harness.claimcheck.status.get(receipt.work_item_id, min_version=1)
    assert before is not None
    assert after is not None
    assert (after.state, after.result, after.updated_at) == (before.state, before.result, before.updated_at)


def test_a_version_whose_receipt_is_no_longer_kept_is_refused_and_changes_nothing(
    make_harness: Callable[..., Harness],
) -> None:
    """A work item keeps the receipts of its last 20 versions: a message of an older version can no
    longer be verified, so it may not run nor, as a duplicate of its completed effect, finish
    settlement writes (before: a copy of it repaired the work item's row from the ledger)."""
    harness = make_harness()
    note = b"A short internal note, version one."
    submit(harness, note, classification="internal", work_item_id="wi-many-versions")
    first = harness.delivery()
    assert consume_and_settle(harness.claimcheck.consumer, first) == Complete()
    for version in range(2, 23):
        text = f"A short internal note, version {version}.".encode()
        submit(harness, text, classification="internal", work_item_id="wi-many-versions")
    status = harness.claimcheck.status
    record = status.record("wi-many-versions")
    assert record is not None
    assert 1 not in [receipt.version for receipt in record.receipts]
    scene = Scene(harness, first, first, first, first, first)
    before = snapshot(scene)
    outcome = consume_and_settle(harness.claimcheck.consumer, first)
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.ACCESS_DENIED
    assert snapshot(scene) == before
