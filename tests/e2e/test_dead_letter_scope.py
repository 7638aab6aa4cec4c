"""The operator dead-letter routes against the whole local stack (emulator, Azurite, host, local issuer):
a dead letter is attributed by its work item's own record (written at intake from the caller's
identity), and only when it is the message intake published for it, never by the session id or tenant
its sender wrote on it (claimcheck/dead_letter_scope.py).

The genuine dead letters are intake's own messages of a damaged PDF (processing_failed). The forged
ones are sent straight to the queue, as anyone holding send rights could: a body that is no envelope,
so the consumer dead-letters each at once (invalid_envelope) with its properties intact.
"""

from __future__ import annotations

import uuid
from typing import Any

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from claimcheck.auth import AppRole

from local.identity import LOCAL_ARCHIVE_ROLE, LOCAL_REVIEWERS_GROUP, LocalIdentity, identity_named
from local.stack import LocalStack

from .journey import SAMPLES, TEST_IDENTITY, dead_letters, wait_until

DOCUMENT = (SAMPLES / "service-agreement.txt").read_bytes()
# Fails processing: the consumer dead-letters intake's own message (processing_failed).
DAMAGED = (SAMPLES.parent / "dead-letter" / "damaged-contract.pdf").read_bytes()
# In no grant of the access table by id: its tokens reach tenants only through their claims, here the
# archive role (tenants r-*). An operator of r- tenants and nothing else.
ARCHIVE_OPERATOR = LocalIdentity(
    "e2e-archive-operator",
    "0b1ec7a1-0000-4000-8000-0000000000e2",
    "a99a0000-0000-4000-8000-0000000000e2",
    roles=(),
    tenants=(),
)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _submit(
    stack: LocalStack, headers: dict[str, str], tenant: str, work_item_id: str, *, damaged: bool = False
) -> None:
    intake = {
        **headers,
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "internal",
        "X-Work-Item-Id": work_item_id,
        "Content-Type": "application/pdf" if damaged else "text/plain",
    }
    document = DAMAGED if damaged else DOCUMENT
    answer = requests.post(f"{stack.api_url}/documents", data=document, headers=intake, timeout=60)
    assert answer.status_code == 202, answer.text


def _genuine_dead_letter(bus: ServiceBusClient, work_item_id: str) -> ServiceBusReceivedMessage:
    """The dead letter of intake's own message for ``work_item_id`` (a damaged PDF's)."""
    found: list[ServiceBusReceivedMessage] = []

    def dead_lettered() -> bool:
        found[:] = [
            m
            for m in dead_letters(bus)
            if m.session_id == work_item_id and m.dead_letter_reason == "processing_failed"
        ]
        return len(found) == 1

    wait_until(dead_lettered, f"the message of {work_item_id} was not dead-lettered")
    return found[0]


def _not_an_envelope(session_id: str, stated_tenant: str) -> ServiceBusMessage:
    return ServiceBusMessage(
        b"{not json",
        session_id=session_id,
        message_id=f"stated-{stated_tenant}-{uuid.uuid4().hex[:8]}",
        application_properties={"tenant": stated_tenant, "purpose": "contract-review"},
    )


def _replay(stack: LocalStack, headers: dict[str, str], sequence_number: int) -> requests.Response:
    url = f"{stack.api_url}/dead-letters/{sequence_number}/replay"
    return requests.post(url, headers=headers, timeout=60)


def _still_dead_lettered(bus: ServiceBusClient, before: ServiceBusReceivedMessage) -> bool:
    now = {message.sequence_number: message for message in dead_letters(bus)}
    after = now.get(before.sequence_number)
    return after is not None and (after.message_id, after.delivery_count) == (
        before.message_id,
        before.delivery_count,
    )


def test_a_dead_letter_forging_a_tenant_is_not_shown_to_or_replayable_by_that_tenants_operator(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    tests = identity_named(TEST_IDENTITY)
    victim_tenant, forged_tenant = f"t-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:8]}"
    victim_item, own_item = f"wi-victim-{uuid.uuid4().hex[:12]}", f"wi-own-{uuid.uuid4().hex[:12]}"
    # Records written by intake from the callers' identities: one work item per tenant.
    _submit(stack, stack.auth_headers(TEST_IDENTITY), victim_tenant, victim_item)
    archive_submitter = _bearer(stack.token(TEST_IDENTITY, roles=(*tests.roles, LOCAL_ARCHIVE_ROLE)))
    _submit(stack, archive_submitter, forged_tenant, own_item, damaged=True)

    forged = _not_an_envelope(victim_item, forged_tenant)  # the victim's work item, the r- tenant stated
    ghost = _not_an_envelope(f"wi-ghost-{uuid.uuid4().hex[:12]}", forged_tenant)  # no record at all
    # Record and statement agree, but it is no message intake published: attributed to nobody either.
    stated_only = _not_an_envelope(own_item, forged_tenant)
    with bus.get_queue_sender("documents") as sender:
        sender.send_messages([forged, ghost, stated_only])
    sent = {str(message.message_id) for message in (forged, ghost, stated_only)}
    found: dict[str, ServiceBusReceivedMessage] = {}

    def all_dead_lettered() -> bool:
        found.update({str(m.message_id): m for m in dead_letters(bus) if m.message_id in sent})
        return set(found) == sent

    wait_until(all_dead_lettered, "the three messages were not all dead-lettered")
    forged_dead, ghost_dead, stated_dead = (found[str(m.message_id)] for m in (forged, ghost, stated_only))
    assert {m.dead_letter_reason for m in found.values()} == {"invalid_envelope"}
    own_dead = _genuine_dead_letter(bus, own_item)  # intake's own message: its record's
    own_id = str(own_dead.message_id)

    archive_operator = _bearer(
        stack.minter.token(ARCHIVE_OPERATOR, roles=(AppRole.OPERATE, LOCAL_ARCHIVE_ROLE))
    )
    listed = requests.get(f"{stack.api_url}/dead-letters", headers=archive_operator, timeout=60)
    assert listed.status_code == 200, listed.text
    shown: list[dict[str, Any]] = listed.json()["messages"]
    shown_ids = {message["message_id"] for message in shown}
    assert own_id in shown_ids
    assert forged.message_id not in shown_ids
    assert ghost.message_id not in shown_ids
    assert stated_only.message_id not in shown_ids
    assert all(message["work_item_id"] != victim_item for message in shown)

    # A refusal reads exactly like a sequence number that is not there, and moves nothing.
    unknown = 10**17
    absent = _replay(stack, archive_operator, unknown)
    assert (absent.status_code, absent.json()) == (
        404,
        {"error": "not_found", "message": f"no dead-lettered message {unknown}"},
    )
    victim_operator = _bearer(stack.token(TEST_IDENTITY, roles=(*tests.roles, AppRole.OPERATE)))
    for caller, message in (
        (archive_operator, forged_dead),
        (archive_operator, ghost_dead),
        (archive_operator, stated_dead),
        (victim_operator, forged_dead),  # the record's tenant: the message still names another tenant
    ):
        refused = _replay(stack, caller, int(message.sequence_number or 0))
        assert (refused.status_code, refused.json()) == (
            404,
            {"error": "not_found", "message": f"no dead-lettered message {message.sequence_number}"},
        )
    assert _still_dead_lettered(bus, forged_dead)
    assert _still_dead_lettered(bus, ghost_dead)

    replayed = _replay(stack, archive_operator, int(own_dead.sequence_number or 0))
    assert (replayed.status_code, replayed.json()["status"]) == (200, "replayed"), replayed.text
    assert replayed.json()["replay_message_id"] == f"{own_id}.replay.{own_dead.sequence_number}"


def test_x_tenant_id_narrows_the_operator_routes_as_it_narrows_status_reads_and_never_widens_them(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    """The operator routes apply AccessTable.read_scope like the status routes: X-Tenant-Id selects one
    of the caller's tenants; a tenant it is not granted lists nothing and replays nothing, with exactly
    the answers of a granted tenant without dead letters and of a missing sequence number."""
    tests = identity_named(TEST_IDENTITY)
    archived, reviewed = f"r-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    archived_item, reviewed_item = f"wi-r-{uuid.uuid4().hex[:12]}", f"wi-g-{uuid.uuid4().hex[:12]}"
    _submit(
        stack,
        _bearer(stack.token(TEST_IDENTITY, roles=(*tests.roles, LOCAL_ARCHIVE_ROLE))),
        archived,
        archived_item,
        damaged=True,
    )
    reviewer = stack.minter.sign({**stack.minter.claims(tests), "groups": [LOCAL_REVIEWERS_GROUP]})
    _submit(stack, _bearer(reviewer), reviewed, reviewed_item, damaged=True)
    dead = {
        tenant: _genuine_dead_letter(bus, item)
        for tenant, item in ((archived, archived_item), (reviewed, reviewed_item))
    }
    ids = {str(message.message_id): tenant for tenant, message in dead.items()}

    # Granted r-* (app role) and g-* (group): both tenants, or one of them when it is selected.
    both = stack.minter.sign(
        {
            **stack.minter.claims(ARCHIVE_OPERATOR, roles=(AppRole.OPERATE, LOCAL_ARCHIVE_ROLE)),
            "groups": [LOCAL_REVIEWERS_GROUP],
        }
    )
    only_archive = stack.minter.token(ARCHIVE_OPERATOR, roles=(AppRole.OPERATE, LOCAL_ARCHIVE_ROLE))

    def listed(token: str, selected: str | None = None) -> requests.Response:
        headers = _bearer(token) | ({} if selected is None else {"X-Tenant-Id": selected})
        answer = requests.get(f"{stack.api_url}/dead-letters", headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer

    def ours(answer: requests.Response) -> set[str]:
        return {ids[m["message_id"]] for m in answer.json()["messages"] if m["message_id"] in ids}

    assert ours(listed(both)) == {archived, reviewed}
    # limit is "at most this many" (the contract's digits allow 0): 0 lists none. Found in review: it
    # listed the default page of 100 instead.
    none = requests.get(
        f"{stack.api_url}/dead-letters", params={"limit": "0"}, headers=_bearer(both), timeout=60
    )
    assert (none.status_code, none.json()["messages"]) == (200, [])
    assert ours(listed(both, archived)) == {archived}
    assert ours(listed(both, reviewed)) == {reviewed}
    # Not granted, malformed, or granted without dead letters: the same empty answer, byte for byte.
    empty = listed(both, f"g-{uuid.uuid4().hex[:8]}")
    assert empty.json() == {"queue": "documents", "messages": []}
    for token, selected in (
        (both, "t-not-granted"),
        (both, "g-*"),
        (both, "bad id'"),
        (only_archive, reviewed),
    ):
        assert listed(token, selected).content == empty.content

    def replay(token: str, selected: str, tenant: str) -> requests.Response:
        sequence_number = int(dead[tenant].sequence_number or 0)
        headers = _bearer(token) | {"X-Tenant-Id": selected}
        return requests.post(
            f"{stack.api_url}/dead-letters/{sequence_number}/replay", headers=headers, timeout=60
        )

    for token, selected, tenant in ((both, reviewed, archived), (only_archive, reviewed, reviewed)):
        refused = replay(token, selected, tenant)
        number = dead[tenant].sequence_number
        assert (refused.status_code, refused.json()) == (
            404,
            {"error": "not_found", "message": f"no dead-lettered message {number}"},
        )
        assert _still_dead_lettered(bus, dead[tenant])
    replayed = replay(both, reviewed, reviewed)
    assert (replayed.status_code, replayed.json()["status"]) == (200, "replayed"), replayed.text
