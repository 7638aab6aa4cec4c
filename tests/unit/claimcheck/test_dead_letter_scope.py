"""claimcheck.dead_letter_scope: a dead letter belongs to the work item of its record, and only when the
message is the one intake published for a version of it; what the message states alone decides nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from claimcheck.access import AccessTable
from claimcheck.auth import Caller
from claimcheck.dead_letter_scope import DeadLetterScope
from claimcheck.provenance import Stated, message_sha256
from claimcheck.receipts import WriteReceipt
from claimcheck.states import WorkItemState
from claimcheck.workitems import WorkItemRecord

from tests.unit.claimcheck.test_envelope import make_envelope

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _published(work_item_id: str, tenant: str) -> tuple[Stated, WorkItemRecord]:
    """A message as intake publishes it, and the work item's row with the receipt intake records."""
    envelope = make_envelope(work_item_id=work_item_id, tenant_id=tenant)
    message = envelope.to_message(priority="normal", document_type=None, review_required=False)
    stated = Stated(envelope, message.session_id, dict(message.application_properties))
    receipt = WriteReceipt(
        work_item_id=work_item_id,
        version=1,
        transport="reference",
        payload_ref=envelope.payload_ref,
        object_etag='"0x1"',
        request_id="req",
        message_id=envelope.message_id,
        accepted_at=NOW,
        visibility_deadline=NOW + timedelta(seconds=30),
        content_length=envelope.content_length,
        sha256=envelope.checksum.value,
        message_sha256=message_sha256(envelope, message.session_id, message.application_properties),
    )
    record = WorkItemRecord(
        work_item_id=work_item_id,
        tenant_id=tenant,
        purpose=envelope.purpose,
        version=1,
        pending_version=1,
        state=WorkItemState.FAILED,
        receipts=(receipt,),
        result=None,
        failure_reason="processing_failed",
        updated_at=NOW,
        etag="W/1",
    )
    return stated, record


ACME, ACME_RECORD = _published("wi-acme", "acme")
GLOBEX, GLOBEX_RECORD = _published("wi-globex", "globex")
RECORDS = {"wi-acme": ACME_RECORD, "wi-globex": GLOBEX_RECORD}


def _as(stated: Stated, *, session: str | None = None, **properties: object) -> Stated:
    return replace(
        stated,
        session_id=stated.session_id if session is None else session,
        properties=dict(stated.properties) | properties,
    )


def _scope(*granted: str, reads: list[str] | None = None) -> DeadLetterScope:
    def record(work_item_id: str) -> WorkItemRecord | None:
        if reads is not None:
            reads.append(work_item_id)
        return RECORDS.get(work_item_id)

    return DeadLetterScope(record, lambda tenant: tenant in granted)


GHOST = Stated(make_envelope(work_item_id="wi-ghost", tenant_id="acme"), "wi-ghost", ACME.properties)


@pytest.mark.parametrize(
    ("stated", "owner"),
    [
        (ACME, ACME_RECORD),  # what intake published: record and message agree
        (_as(ACME, tenant="globex"), None),  # globex stated on acme's message
        (_as(ACME, session="wi-globex"), None),  # acme's envelope under globex's work item (session)
        (_as(ACME, session="wi-globex", tenant="globex"), None),  # ... stating globex too
        (Stated(replace(ACME.envelope, tenant_id="globex"), "wi-acme", ACME.properties), None),
        (Stated(replace(ACME.envelope, correlation_id="c-other"), "wi-acme", ACME.properties), None),
        (GHOST, None),  # no record: nobody submitted it through intake
        (None, None),  # no envelope at all
    ],
)
def test_owner_is_the_record_only_of_the_message_intake_published(
    stated: Stated | None, owner: WorkItemRecord | None
) -> None:
    assert _scope().owner(stated) == owner


def test_a_forged_message_is_shown_neither_to_the_stated_tenant_nor_to_the_records() -> None:
    forged = _as(ACME, session="wi-globex", tenant="globex")
    assert _scope("globex").shows(forged) is None
    assert _scope("acme").shows(forged) is None
    assert _scope("acme", "globex").shows(GHOST) is None
    assert _scope("acme").shows(ACME) == ACME_RECORD
    assert _scope("globex").shows(ACME) is None


def test_each_work_item_is_read_once_per_scope_and_only_for_granted_tenants() -> None:
    reads: list[str] = []
    scope = _scope("acme", reads=reads)
    for _ in range(3):
        scope.shows(ACME)
        scope.shows(GHOST)
        scope.shows(None)
        scope.shows(GLOBEX)  # a tenant this operator is not granted: no read needed
    assert reads == ["wi-acme", "wi-ghost"]


OPERATOR = Caller(object_id="oid-operator", app_id="app-operator", directory_tenant="d", roles=frozenset())
TABLE = AccessTable.parse(
    json.dumps([{"name": "ops", "principal": "oid-operator", "tenants": ["acme", "globex"]}])
)


@pytest.mark.parametrize(
    ("stated_header", "shown", "records_read"),
    [
        (None, {"wi-acme", "wi-globex"}, {"wi-acme", "wi-globex"}),  # no X-Tenant-Id: every granted tenant
        ("acme", {"wi-acme"}, {"wi-acme"}),  # narrowed to one granted tenant
        ("globex", {"wi-globex"}, {"wi-acme", "wi-globex"}),  # the forgery states globex: its record is read
        ("initech", set(), set()),  # not granted: nothing, like a tenant without dead letters
        ("", set(), set()),
    ],
)
def test_x_tenant_id_narrows_the_operators_view_as_it_narrows_status_reads(
    stated_header: str | None, shown: set[str], records_read: set[str]
) -> None:
    """The operator routes build their scope from AccessTable.read_scope, the status routes' rule."""
    reads: list[str] = []

    def record(work_item_id: str) -> WorkItemRecord | None:
        reads.append(work_item_id)
        return RECORDS.get(work_item_id)

    scope = DeadLetterScope(record, TABLE.read_scope(OPERATOR, stated_header))
    forged = Stated(replace(ACME.envelope, tenant_id="globex"), "wi-acme", ACME.properties)
    messages = [ACME, GLOBEX, forged]
    assert {stated.envelope.work_item_id for stated in messages if scope.shows(stated)} == shown
    # A message naming a tenant outside the narrowed scope costs no record read.
    assert set(reads) == records_read
