"""claimcheck.dead_letter_scope: a dead letter belongs to the tenant its work item's record names, and
only when the message states that same tenant; what the message states alone decides nothing."""

from __future__ import annotations

import json

import pytest
from claimcheck.access import AccessTable
from claimcheck.auth import Caller
from claimcheck.dead_letter_scope import DeadLetterScope

RECORDS = {"wi-acme": "acme", "wi-globex": "globex"}


def _scope(*granted: str, reads: list[str] | None = None) -> DeadLetterScope:
    def recorded(work_item_id: str) -> str | None:
        if reads is not None:
            reads.append(work_item_id)
        return RECORDS.get(work_item_id)

    return DeadLetterScope(recorded, lambda tenant: tenant in granted)


@pytest.mark.parametrize(
    ("work_item_id", "stated", "owner"),
    [
        ("wi-acme", "acme", "acme"),  # our producer's message: record and statement agree
        ("wi-acme", "globex", None),  # forged: globex stated on acme's work item
        ("wi-acme", None, None),  # states no tenant: not a message our producer sent
        ("wi-unknown", "acme", None),  # no record: nobody submitted it through intake
        (None, "acme", None),  # no session id
        ("not/an id", "acme", None),  # not a work item id: never sent to the table as a key
    ],
)
def test_owner_is_the_record_when_the_message_agrees(
    work_item_id: str | None, stated: str | None, owner: str | None
) -> None:
    assert _scope().owner(work_item_id, stated) == owner


def test_a_forged_tenant_is_shown_neither_to_its_operators_nor_to_the_records() -> None:
    assert not _scope("globex").shows("wi-acme", "globex")
    assert not _scope("acme").shows("wi-acme", "globex")
    assert not _scope("acme", "globex").shows("wi-unknown", "acme")
    assert _scope("acme").shows("wi-acme", "acme")
    assert not _scope("globex").shows("wi-acme", "acme")


def test_each_work_item_is_read_once_per_scope_and_invalid_ids_never() -> None:
    reads: list[str] = []
    scope = _scope("acme", reads=reads)
    for _ in range(3):
        scope.shows("wi-acme", "acme")
        scope.shows("wi-unknown", "acme")
        scope.shows("bad id", "acme")
        scope.shows("wi-globex", "globex")  # a tenant this operator is not granted: no read needed
    assert reads == ["wi-acme", "wi-unknown"]


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

    def recorded(work_item_id: str) -> str | None:
        reads.append(work_item_id)
        return RECORDS.get(work_item_id)

    scope = DeadLetterScope(recorded, TABLE.read_scope(OPERATOR, stated_header))
    messages = [("wi-acme", "acme"), ("wi-globex", "globex"), ("wi-acme", "globex")]  # the last one forged
    assert {item for item, stated in messages if scope.shows(item, stated)} == shown
    # A message stating a tenant outside the narrowed scope costs no record read.
    assert set(reads) == records_read
