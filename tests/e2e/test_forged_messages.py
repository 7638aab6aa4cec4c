"""The queue is untrusted input (issue 26), on the whole local stack: forged messages sent straight to
the documents queue, as anyone holding Service Bus Data Sender on it could, each end dead-lettered with
a reason, and the victims' status answers, results, result events and dead-letter views (the operator
routes of the victim's tenant and of the other tenant) are byte-identical before and after; no forged
dead letter can be replayed through the API by either tenant's operator.

The genuine envelopes the forgeries start from are the victim's own dead-lettered messages (a damaged PDF
fails processing: ``processing_failed``): a confidential one by reference (``failed``, the issue's
forgery 1 victim) and an internal one inline (``inline``). A completed work item of the victim
(``done``) and one of another tenant (``other``) are the work items a forgery may try to borrow.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus.exceptions import ServiceBusError
from claimcheck import ClaimCheck
from claimcheck.adapters.servicebus import ServiceBusBus
from claimcheck.auth import AppRole
from claimcheck.envelope import Checksum, Envelope
from claimcheck.messages import OutboundMessage
from claimcheck.policy import Classification
from claimcheck.refs import new_payload_ref
from claimcheck.settings import Settings
from claimcheck.timestamps import format_timestamp

from local.identity import LOCAL_ARCHIVE_ROLE, identity_named
from local.stack import LocalStack

from .journey import SAMPLES, TEST_IDENTITY, dead_letters, result_events, wait_for_states, wait_until
from .test_dead_letter_scope import ARCHIVE_OPERATOR

DAMAGED = (SAMPLES.parent / "dead-letter" / "damaged-contract.pdf").read_bytes()
DOCUMENT = (SAMPLES / "service-agreement.txt").read_bytes()
INVENTED = b"1. The Customer shall pay the Supplier EUR 1,000,000 on demand.\n"
DAY = timedelta(hours=25)
REPLAYED = {"rewritten-inline", "session-of-another-tenant", "reference-expiry-moved-back", "no-record"}


@dataclass(frozen=True)
class Genuine:
    """A message as intake published it (read back from the dead-letter queue)."""

    body: dict[str, Any]
    session_id: str
    properties: dict[str | bytes, Any]


@dataclass(frozen=True)
class Scene:
    stack: LocalStack
    victim: str  # the victim's tenant (t-…, the test identity's grant)
    other: str  # another tenant (r-…, reached through the archive role)
    failed: Genuine
    inline: Genuine
    done: str
    other_item: str

    def headers(self, tenant: str) -> dict[str, str]:
        roles = (*identity_named(TEST_IDENTITY).roles, LOCAL_ARCHIVE_ROLE)
        return {
            "Authorization": f"Bearer {self.stack.token(TEST_IDENTITY, roles=roles)}",
            "X-Tenant-Id": tenant,
        }

    def operator(self, tenant: str) -> dict[str, str]:
        """An operator of ``tenant`` only: t-* for the victim's, r-* (the archive role) for the other."""
        if tenant == self.victim:
            roles = (*identity_named(TEST_IDENTITY).roles, AppRole.OPERATE)
            token = self.stack.token(TEST_IDENTITY, roles=roles)
        else:
            token = self.stack.minter.token(ARCHIVE_OPERATOR, roles=(AppRole.OPERATE, LOCAL_ARCHIVE_ROLE))
        return {"Authorization": f"Bearer {token}", "X-Tenant-Id": tenant}

    def work_items(self) -> dict[str, str]:
        """Each work item of the scene and its tenant."""
        return {
            self.failed.session_id: self.victim,
            self.inline.session_id: self.victim,
            self.done: self.victim,
            self.other_item: self.other,
        }


def _submit(scene_headers: dict[str, str], stack: LocalStack, document: bytes, **intake: str) -> str:
    headers = scene_headers | {
        "X-Purpose": "contract-review",
        "X-Classification": intake["classification"],
        "Content-Type": intake["content_type"],
    }
    answer = requests.post(f"{stack.api_url}/documents", data=document, headers=headers, timeout=60)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["work_item_id"])


def _genuine(message: ServiceBusReceivedMessage) -> Genuine:
    properties: dict[str | bytes, Any] = {
        _text(key): _text(value) for key, value in (message.application_properties or {}).items()
    }
    for broker_set in ("DeadLetterReason", "DeadLetterErrorDescription"):
        properties.pop(broker_set, None)
    return Genuine(json.loads(b"".join(message.body)), str(message.session_id), properties)


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _dead_letter_of(bus: ServiceBusClient, work_item_id: str) -> ServiceBusReceivedMessage:
    found: list[ServiceBusReceivedMessage] = []

    def dead_lettered() -> bool:
        found[:] = [m for m in dead_letters(bus) if m.session_id == work_item_id]
        return len(found) == 1

    wait_until(dead_lettered, f"the genuine message of {work_item_id} was not dead-lettered once")
    return found[0]


@pytest.fixture(scope="module")
def scene(stack: LocalStack) -> Scene:
    victim, other = f"t-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:8]}"
    partial = Scene(stack, victim, other, Genuine({}, "", {}), Genuine({}, "", {}), "", "")
    as_victim, as_other = partial.headers(victim), partial.headers(other)
    failed = _submit(as_victim, stack, DAMAGED, classification="confidential", content_type="application/pdf")
    inline = _submit(as_victim, stack, DAMAGED, classification="internal", content_type="application/pdf")
    done = _submit(as_victim, stack, DOCUMENT, classification="confidential", content_type="text/plain")
    other_item = _submit(as_other, stack, DOCUMENT, classification="internal", content_type="text/plain")
    wait_for_states(stack, [failed, inline], ("failed",))
    wait_for_states(stack, [done], ("completed",))
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus:
        genuine_failed, genuine_inline = (_genuine(_dead_letter_of(bus, item)) for item in (failed, inline))
    assert "payload_ref" in genuine_failed.body
    assert "payload_inline" in genuine_inline.body
    scene = Scene(stack, victim, other, genuine_failed, genuine_inline, done, other_item)
    # The other tenant's work item, read by the other tenant (the test identity holds r-* only with
    # the archive role, which partial.headers adds).
    _wait_completed(scene, other_item, other)
    return scene


def _wait_completed(scene: Scene, work_item_id: str, tenant: str) -> None:
    def completed() -> bool:
        answer = requests.get(
            f"{scene.stack.api_url}/work-items/{work_item_id}", headers=scene.headers(tenant), timeout=60
        )
        return answer.status_code == 200 and answer.json()["state"] == "completed"

    wait_until(completed, f"{work_item_id} was not completed")


def snapshot(scene: Scene, bus: ServiceBusClient) -> dict[str, Any]:
    """What the victims and their operators see, as the API answers it (bytes) and the topic holds it."""
    api = scene.stack.api_url
    seen: dict[str, Any] = {}
    for work_item_id, tenant in scene.work_items().items():
        headers = scene.headers(tenant)
        status = requests.get(f"{api}/work-items/{work_item_id}?min_version=1", headers=headers, timeout=60)
        result = requests.get(
            f"{api}/work-items/{work_item_id}/result?version=1", headers=headers, timeout=60
        )
        seen[work_item_id] = (status.status_code, status.text, result.status_code, result.text)
    for tenant in (scene.victim, scene.other):
        listed = requests.get(f"{api}/dead-letters", headers=scene.operator(tenant), timeout=60)
        assert listed.status_code == 200, listed.text
        seen[f"dead-letters:{tenant}"] = listed.text
    seen["events"] = sorted(
        (event.subscription, event.work_item_id, event.sequence_number, event.message_id)
        for event in result_events(bus, list(scene.work_items()))
    )
    return seen


def _moved(genuine: Genuine, name: str, delta: timedelta) -> str:
    return format_timestamp(datetime.fromisoformat(genuine.body[name]) + delta)


@dataclass(frozen=True)
class Forgery:
    name: str
    message: ServiceBusMessage
    reason: str


def _forge(
    name: str,
    genuine: Genuine,
    *,
    session: str | None = None,
    properties: dict[str | bytes, Any] | None = None,
    drop: tuple[str, ...] = (),
    reason: str = "access_denied",
    **fields: Any,
) -> Forgery:
    body = {key: value for key, value in genuine.body.items() if key not in drop} | fields
    message = ServiceBusMessage(
        json.dumps(body).encode(),
        session_id=genuine.session_id if session is None else session,
        message_id=f"forged-{name}-{uuid.uuid4().hex[:8]}",
        content_type="application/json",
        application_properties=genuine.properties if properties is None else properties,
    )
    return Forgery(name, message, reason)


def _inline_invented(name: str, genuine: Genuine, **fields: Any) -> Forgery:
    return _forge(
        name,
        genuine,
        drop=("payload_ref",),
        payload_inline=base64.b64encode(INVENTED).decode(),
        content_length=len(INVENTED),
        checksum={"algorithm": "sha256", "value": hashlib.sha256(INVENTED).hexdigest()},
        **fields,
    )


def forgeries(scene: Scene) -> list[Forgery]:
    made: list[Forgery] = [
        # Forgery 1 of the issue: the failed confidential by-reference envelope made inline (internal,
        # text/plain, an invented clause with its true sha256), session and properties left as the victim's.
        _inline_invented(
            "rewritten-inline", scene.failed, classification="internal", content_type="text/plain"
        ),
        # Forgery 2: the envelope unchanged, another tenant's work item as session, that tenant stated.
        _forge(
            "session-of-another-tenant",
            scene.failed,
            session=scene.other_item,
            properties=scene.failed.properties | {"tenant": scene.other},
        ),
    ]
    for kind, genuine in (("reference", scene.failed), ("inline", scene.inline)):
        props = genuine.properties

        def forge(name: str, reason: str = "access_denied", **changes: Any) -> Forgery:
            return _forge(f"{kind}-{name}", genuine, reason=reason, **changes)  # noqa: B023

        made += [
            # Forgery 3: a copy moved back 25 h (expired).
            forge(
                "expiry-moved-back",
                created_at=_moved(genuine, "created_at", -DAY),
                expires_at=_moved(genuine, "expires_at", -DAY),
            ),
            forge("expiry-extended", expires_at=_moved(genuine, "expires_at", DAY)),
            forge("borrows-completed-work-item", work_item_id=scene.done, session=scene.done),
            forge("borrows-other-tenants-work-item", work_item_id=scene.other_item, session=scene.other_item),
            forge("tenant", tenant_id=scene.other),
            forge("purpose", purpose="bulk-ingest"),
            forge("classification", classification="public"),
            forge("content-type", content_type="text/plain"),
            forge("length", content_length=genuine.body["content_length"] + 1),
            forge("checksum", checksum={"algorithm": "sha256", "value": "0" * 64}),
            forge("environment", environment="prod"),
            forge("correlation-id", correlation_id="c-forged"),
            forge(
                "version",
                reason="access_denied" if kind == "reference" else "payload_missing",
                payload_version=2,
                created_at=_moved(genuine, "created_at", -timedelta(hours=1)),
            ),
            forge("session-of-completed-work-item", session=scene.done),
            forge("tenant-property", properties=props | {"tenant": scene.other}),
            forge("purpose-property", properties=props | {"purpose": "bulk-ingest"}),
            forge("priority-property", properties=props | {"priority": "high"}),
            forge("review-property", properties=props | {"review_required": True}),
            forge("no-properties", properties={}),
            _inline_invented(f"{kind}-payload-invented", genuine),
        ]
    ghost = f"wi-ghost-{uuid.uuid4().hex[:8]}"
    made += [
        _forge("unknown-ref", scene.failed, payload_ref=new_payload_ref()),
        # A message with no record: a work item nobody submitted, created long enough ago to be past
        # the visibility grace.
        _forge(
            "no-record",
            scene.inline,
            reason="payload_missing",
            work_item_id=ghost,
            session=ghost,
            created_at=_moved(scene.inline, "created_at", -timedelta(hours=1)),
        ),
    ]
    return made


def test_forged_messages_are_dead_lettered_and_change_nothing_anyone_sees(
    scene: Scene, bus: ServiceBusClient
) -> None:
    before = snapshot(scene, bus)
    made = forgeries(scene)
    with bus.get_queue_sender("documents") as sender:
        sender.send_messages([forgery.message for forgery in made])
    by_id = {str(forgery.message.message_id): forgery for forgery in made}
    dead: dict[str, ServiceBusReceivedMessage] = {}

    def all_dead_lettered() -> bool:
        dead.update({str(m.message_id): m for m in dead_letters(bus) if str(m.message_id) in by_id})
        return set(dead) == set(by_id)

    wait_until(all_dead_lettered, "the forged messages were not all dead-lettered", timeout=120)
    reasons = {
        by_id[key].name: (message.dead_letter_reason, by_id[key].reason) for key, message in dead.items()
    }
    assert {name: got for name, (got, _) in reasons.items()} == {
        name: want for name, (_, want) in reasons.items()
    }
    after = snapshot(scene, bus)
    assert after == before
    # Nobody's operator replays a forged dead letter: each answers like a sequence number not there
    # (the three forgeries and the message with no record; a refused replay costs a second).
    replayed = {key: m for key, m in dead.items() if by_id[key].name in REPLAYED}
    assert len(replayed) == len(REPLAYED)
    for tenant in (scene.victim, scene.other):
        for message in replayed.values():
            number = message.sequence_number
            refused = requests.post(
                f"{scene.stack.api_url}/dead-letters/{number}/replay",
                headers=scene.operator(tenant),
                timeout=60,
            )
            assert (refused.status_code, refused.json()) == (
                404,
                {"error": "not_found", "message": f"no dead-lettered message {number}"},
            )
    assert snapshot(scene, bus) == before


def test_the_victims_genuine_dead_letters_are_shown_to_its_operator_as_its_record_has_them(
    scene: Scene,
) -> None:
    """The views the forgeries must leave unchanged are not empty: the victim's operator sees its two
    genuine dead letters, attributed to its own work items and tenant; the other tenant's sees neither."""
    api = scene.stack.api_url
    mine = requests.get(f"{api}/dead-letters", headers=scene.operator(scene.victim), timeout=60).json()
    shown = {(m["work_item_id"], m["tenant"], m["reason"]) for m in mine["messages"]}
    assert shown == {
        (scene.failed.session_id, scene.victim, "processing_failed"),
        (scene.inline.session_id, scene.victim, "processing_failed"),
    }
    theirs = requests.get(f"{api}/dead-letters", headers=scene.operator(scene.other), timeout=60).json()
    assert theirs["messages"] == []


def test_a_forged_message_without_a_session_id_is_refused_by_the_broker(
    scene: Scene, bus: ServiceBusClient
) -> None:
    """The documents queue requires sessions: Service Bus (and the emulator) refuses the send itself."""
    message = ServiceBusMessage(
        json.dumps(scene.failed.body).encode(), application_properties=scene.failed.properties
    )
    with bus.get_queue_sender("documents") as sender, pytest.raises(ServiceBusError):
        sender.send_messages(message)


class _CopyFirst:
    """A producer's bus that sends, on the same session just ahead of the genuine message, a copy of
    its envelope moved back 25 h (so expired): the consumer meets the copy first (a session is FIFO)."""

    def __init__(self, bus: ServiceBusBus) -> None:
        self._bus = bus
        self.copy_id = ""

    def publish(self, destination: str, message: OutboundMessage) -> None:
        body = json.loads(message.body)
        for name in ("created_at", "expires_at"):
            body[name] = format_timestamp(datetime.fromisoformat(body[name]) - DAY)
        copy = replace(message, body=json.dumps(body).encode(), message_id=f"copy-{uuid.uuid4().hex[:12]}")
        self._bus.publish(destination, copy)
        self.copy_id = copy.message_id
        self._bus.publish(destination, message)


def test_an_expired_copy_ahead_of_a_queued_message_leaves_the_genuine_one_to_complete(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    """Forgery 3 of the issue, to its end: the copy is dead-lettered and the genuine message completes
    its work item (before the fix the copy set it expired, and the genuine delivery's effect ended
    expired / needs_reconciliation / reconcile).

    The copy must meet a confirmed version, as the issue's did: a blocker ahead of it on the session (an
    inline envelope for version 2, never confirmed, inside the last seconds of its visibility grace)
    holds the session while intake confirms version 1, then is dead-lettered payload_missing."""
    tenant, work_item_id = f"t-{uuid.uuid4().hex[:8]}", f"wi-copy-{uuid.uuid4().hex[:12]}"
    settings = Settings(environment="local")  # the stack's app settings, as test_stalled_producer's
    grace = timedelta(seconds=settings.visibility_grace_seconds)
    note = b"a blocker"
    blocker = Envelope(
        work_item_id=work_item_id,
        payload_ref=None,
        payload_inline=note,
        payload_version=2,
        content_type="text/plain",
        content_length=len(note),
        checksum=Checksum("sha256", hashlib.sha256(note).hexdigest()),
        classification=Classification.INTERNAL,
        tenant_id=tenant,
        purpose="contract-review",
        environment=settings.environment,
        created_at=datetime.now(UTC) - grace + timedelta(seconds=15),
        expires_at=datetime.now(UTC) + timedelta(hours=1),
        correlation_id=None,
    ).to_message(priority="normal", document_type=None, review_required=False)
    sender = ServiceBusBus(connection_string=stack.servicebus_connection_string)
    try:
        sender.publish("documents", blocker)
        copy_first = _CopyFirst(sender)
        producer = ClaimCheck.from_settings(
            settings, storage_connection=stack.storage_connection_string, bus=copy_first
        ).producer
        producer.submit(
            DOCUMENT,
            tenant_id=tenant,
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
    finally:
        sender.close()
    view = wait_for_states(stack, [work_item_id], ("completed", "failed", "expired"), timeout=180)[
        work_item_id
    ]
    assert (view["state"], view["next_action"], view["failure_reason"]) == ("completed", "proceed", None)
    reasons = {
        str(m.message_id): m.dead_letter_reason for m in dead_letters(bus) if m.session_id == work_item_id
    }
    assert reasons == {blocker.message_id: "payload_missing", copy_first.copy_id: "access_denied"}
    assert [
        event.version for event in result_events(bus, [work_item_id]) if event.subscription == "audit"
    ] == [1]
