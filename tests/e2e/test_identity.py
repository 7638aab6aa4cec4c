"""Caller identity over HTTP on the local stack, with real tokens of the local issuer (issue 8).

Every refusal is checked for its status, its fixed body (no hint of which check failed, no other
tenant named) and, for intake, that nothing was created: no work item, no registry record.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import HttpFunction, load_function_app
from local.identity import LOCAL_ARCHIVE_ROLE, LOCAL_REVIEWERS_GROUP, SigningKey, TokenMinter, identity_named
from local.stack import LocalStack

from .journey import SAMPLES, TEST_IDENTITY, auth, dead_letters, submit, wait_for_states, wait_until

DOCUMENT = (SAMPLES / "service-agreement.txt").read_bytes()
UNAUTHENTICATED = {"error": "unauthenticated", "message": "a valid bearer token for this API is required"}
FORBIDDEN_TENANT = {
    "error": "forbidden",
    "message": "this caller may not use that tenant, purpose or classification",
}


def not_found(work_item_id: str) -> dict[str, str]:
    return {"error": "not_found", "message": f"no work item {work_item_id}"}


@pytest.fixture(scope="module")
def refused_work_items() -> list[str]:
    """Work item ids of refused submissions; at the end none of them may exist anywhere."""
    ids: list[str] = []
    return ids


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unsigned(header: dict[str, Any], claims: dict[str, Any], key: bytes | None) -> str:
    head, body = _b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode())
    signature = b"" if key is None else hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(signature)}"


def bad_authorizations(stack: LocalStack) -> dict[str, str | None]:
    """One Authorization header per kind of bad token the issue lists."""
    minter, tests = stack.minter, identity_named(TEST_IDENTITY)
    now = int(time.time())

    def claims(**changes: Any) -> dict[str, Any]:
        return {**minter.claims(tests), **changes}

    foreign = TokenMinter(SigningKey.generate(), minter.base_url)
    tokens = {
        "malformed": "not-a-jwt",
        "expired": minter.sign(claims(iat=now - 7200, nbf=now - 7200, exp=now - 3600)),
        "not yet valid": minter.sign(claims(nbf=now + 3600, exp=now + 7200)),
        "wrong audience": minter.sign(claims(aud="api://another-api")),
        "wrong issuer": minter.sign(claims(iss="https://login.microsoftonline.com/other-tenant/v2.0")),
        "unknown kid": foreign.sign(claims()),
        "foreign key, real kid": foreign.sign(claims(), kid=minter.key.kid),
        "alg none": _unsigned({"alg": "none", "typ": "JWT", "kid": minter.key.kid}, claims(), None),
        "HS256 keyed with the public key": _unsigned(
            {"alg": "HS256", "typ": "JWT", "kid": minter.key.kid}, claims(), minter.key.public_pem()
        ),
    }
    return {"no token": None, **{name: f"Bearer {token}" for name, token in tokens.items()}}


BAD_KINDS = (
    "no token",
    "malformed",
    "expired",
    "not yet valid",
    "wrong audience",
    "wrong issuer",
    "unknown kid",
    "foreign key, real kid",
    "alg none",
    "HS256 keyed with the public key",
)


def _post(stack: LocalStack, headers: dict[str, str], work_item_id: str) -> requests.Response:
    sent = {
        "X-Tenant-Id": "t-identity",
        "X-Purpose": "contract-review",
        "X-Classification": "internal",
        "Content-Type": "text/plain",
        "X-Work-Item-Id": work_item_id,
        **headers,
    }
    return requests.post(f"{stack.api_url}/documents", data=DOCUMENT, headers=sent, timeout=60)


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_a_bad_token_gets_401_with_bearer_challenge_and_no_detail(
    stack: LocalStack, refused_work_items: list[str], kind: str
) -> None:
    authorization = bad_authorizations(stack)[kind]
    headers = {} if authorization is None else {"Authorization": authorization}
    work_item_id = f"wi-refused-{uuid.uuid4().hex[:12]}"
    refused_work_items.append(work_item_id)
    submitted = _post(stack, headers, work_item_id)
    read = requests.get(f"{stack.api_url}/work-items/{work_item_id}", headers=headers, timeout=30)
    for response in (submitted, read):
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert response.json() == UNAUTHENTICATED


def test_two_authorization_headers_are_one_malformed_credential(stack: LocalStack) -> None:
    """A request with two Authorization field lines, one of them a valid token, is refused like a bad
    token: the host joins repeated lines (RFC 9110 §5.3) instead of keeping one of them, so neither
    line can authenticate the request alone. Read as it was sent (http.client writes both lines)."""
    valid = auth(stack)["Authorization"]
    url = urlsplit(stack.api_url)
    for lines in ((valid, "Bearer not-a-token"), ("Bearer not-a-token", valid)):
        connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
        try:
            connection.putrequest("GET", f"{url.path}/work-items/wi-two-credentials")
            for line in lines:
                connection.putheader("Authorization", line)
            connection.endheaders()
            response = connection.getresponse()
            body = json.loads(response.read())
        finally:
            connection.close()
        assert (response.status, body) == (401, UNAUTHENTICATED)
        assert response.getheader("WWW-Authenticate", "").startswith("Bearer")


def test_every_http_route_of_the_app_refuses_a_function_key_alone(stack: LocalStack) -> None:
    """Enumerated from function_app.py, so a route added later without the gate fails here."""
    routes = load_function_app(DEFAULT_APP).of_type(HttpFunction)
    assert routes
    for route in routes:
        path = re.sub(r"\{[^}]*\}", "wi-any", route.route)
        for method in sorted(route.methods or {"GET"}):
            response = requests.request(
                method, f"{stack.api_url}/{path}", headers={"x-functions-key": "a-key"}, data=b"x", timeout=30
            )
            assert (route.route, method, response.status_code) == (route.route, method, 401)


def test_a_valid_token_without_the_route_role_gets_403(
    stack: LocalStack, refused_work_items: list[str]
) -> None:
    """No roles at all, or a reader submitting: 403; a caller with only Documents.Submit cannot read."""
    no_roles = {"Authorization": f"Bearer {stack.token(TEST_IDENTITY, roles=())}"}
    reader = {"Authorization": f"Bearer {stack.token(TEST_IDENTITY, roles=('WorkItems.Read',))}"}
    submitter = {"Authorization": f"Bearer {stack.token(TEST_IDENTITY, roles=('Documents.Submit',))}"}
    for headers in (no_roles, reader):
        work_item_id = f"wi-refused-{uuid.uuid4().hex[:12]}"
        refused_work_items.append(work_item_id)
        response = _post(stack, headers, work_item_id)
        assert response.status_code == 403
        assert response.json()["error"] == "forbidden"
    for headers in (no_roles, submitter):
        response = requests.get(f"{stack.api_url}/work-items/wi-any", headers=headers, timeout=30)
        assert response.status_code == 403


def test_a_tenant_not_granted_gets_the_same_403_whether_it_exists_or_not(
    stack: LocalStack, refused_work_items: list[str]
) -> None:
    """acme exists (local-producer submits there first); the test identity may use t-* only."""
    assert (
        _post(
            stack, {**stack.auth_headers("local-producer"), "X-Tenant-Id": "acme"}, f"wi-{uuid.uuid4().hex}"
        ).status_code
        == 202
    )
    answers = []
    for tenant in ("acme", "no-such-tenant", "t-x' or PartitionKey ne 'z", "t-a/b", "t-\u00e9", "*"):
        work_item_id = f"wi-refused-{uuid.uuid4().hex[:12]}"
        refused_work_items.append(work_item_id)
        response = _post(stack, {**auth(stack), "X-Tenant-Id": tenant}, work_item_id)
        answers.append((response.status_code, response.content))
    assert answers == [(403, json.dumps(FORBIDDEN_TENANT).encode())] * len(answers)


def test_status_of_another_tenants_work_item_reads_like_an_unknown_id(stack: LocalStack) -> None:
    """Plain reads answer the same 404; "at least version 1" reads the same 404 unknown_version."""
    work_item_id = f"wi-acme-{uuid.uuid4().hex[:12]}"
    created = _post(stack, {**stack.auth_headers("local-producer"), "X-Tenant-Id": "acme"}, work_item_id)
    assert created.status_code == 202
    api, unknown = stack.api_url, f"wi-unknown-{uuid.uuid4().hex[:12]}"
    owner = requests.get(
        f"{api}/work-items/{work_item_id}", headers=stack.auth_headers("local-producer"), timeout=30
    )
    assert owner.status_code == 200
    other_tenant = requests.get(f"{api}/work-items/{work_item_id}", headers=auth(stack), timeout=30)
    never_existed = requests.get(f"{api}/work-items/{unknown}", headers=auth(stack), timeout=30)
    assert (other_tenant.status_code, other_tenant.json()) == (404, not_found(work_item_id))
    assert (never_existed.status_code, never_existed.json()) == (404, not_found(unknown))
    # Byte for byte the same answer, but for the id the caller sent itself.
    assert other_tenant.content.replace(work_item_id.encode(), b"ID") == never_existed.content.replace(
        unknown.encode(), b"ID"
    )
    assert other_tenant.headers["Content-Type"] == never_existed.headers["Content-Type"]
    # The owner narrowing itself to another of its tenants sees nothing either.
    narrowed = {**stack.auth_headers("local-producer"), "X-Tenant-Id": "globex"}
    narrowed_read = requests.get(f"{api}/work-items/{work_item_id}", headers=narrowed, timeout=30)
    assert narrowed_read.json() == not_found(work_item_id)
    # The result route by the same rule (AccessTable.read_scope), and stating a tenant never widens.
    narrowed_result = requests.get(f"{api}/work-items/{work_item_id}/result", headers=narrowed, timeout=30)
    assert (narrowed_result.status_code, narrowed_result.json()) == (404, not_found(work_item_id))
    widened = {**auth(stack), "X-Tenant-Id": "acme"}
    for route in (f"work-items/{work_item_id}", f"work-items/{work_item_id}/result"):
        stated = requests.get(f"{api}/{route}", headers=widened, timeout=30)
        assert (stated.status_code, stated.json()) == (404, not_found(work_item_id))
    answers = [
        requests.get(f"{api}/work-items/{item}?min_version=1", headers=auth(stack), timeout=30)
        for item in (work_item_id, unknown)
    ]
    assert [answer.status_code for answer in answers] == [404, 404]
    views = [answer.json() for answer in answers]
    assert views[0]["visibility"] == views[1]["visibility"] == "unknown_version"
    assert answers[0].content.replace(work_item_id.encode(), b"ID") == answers[1].content.replace(
        unknown.encode(), b"ID"
    )


@pytest.mark.parametrize("claim", ["group", "app role"])
def test_a_grant_by_group_or_app_role_admits_only_tokens_carrying_that_claim(
    stack: LocalStack, refused_work_items: list[str], claim: str
) -> None:
    """The local access table grants g-* to a group and r-* to an app role (local/identity): the test
    identity's token carrying the claim may submit for and read such a tenant; the same identity's
    token without it gets the fixed 403 and sees the item as unknown."""
    tests = identity_named(TEST_IDENTITY)
    if claim == "group":
        tenant = f"g-{uuid.uuid4().hex[:8]}"
        carrying = stack.minter.sign({**stack.minter.claims(tests), "groups": [LOCAL_REVIEWERS_GROUP]})
    else:
        tenant = f"r-{uuid.uuid4().hex[:8]}"
        carrying = stack.token(TEST_IDENTITY, roles=(*tests.roles, LOCAL_ARCHIVE_ROLE))
    with_claim = {"Authorization": f"Bearer {carrying}", "X-Tenant-Id": tenant}
    without_claim = {"Authorization": f"Bearer {stack.token(TEST_IDENTITY)}", "X-Tenant-Id": tenant}

    refused_id = f"wi-refused-{uuid.uuid4().hex[:12]}"
    refused_work_items.append(refused_id)
    refused = _post(stack, without_claim, refused_id)
    assert (refused.status_code, refused.json()) == (403, FORBIDDEN_TENANT)
    work_item_id = f"wi-{uuid.uuid4().hex[:12]}"
    assert _post(stack, with_claim, work_item_id).status_code == 202
    status = f"{stack.api_url}/work-items/{work_item_id}"
    seen = requests.get(status, headers=with_claim, timeout=30)
    assert (seen.status_code, seen.json()["work_item_id"]) == (200, work_item_id)
    unseen = requests.get(status, headers=without_claim, timeout=30)
    assert (unseen.status_code, unseen.json()) == (404, not_found(work_item_id))


def test_zz_nothing_was_created_by_any_refused_submission(
    stack: LocalStack, refused_work_items: list[str]
) -> None:
    """No work item row and no registry record for any refused submission of this module."""
    assert len(refused_work_items) >= len(BAD_KINDS)
    with TableServiceClient.from_connection_string(stack.storage_connection_string) as tables:
        work_items = tables.get_table_client("workitems")
        registry = tables.get_table_client("payloadregistry")
        for work_item_id in refused_work_items:
            assert (
                list(work_items.query_entities("PartitionKey eq @id", parameters={"id": work_item_id})) == []
            )
            assert list(registry.query_entities("work_item_id eq @id", parameters={"id": work_item_id})) == []


def test_a_forged_same_tenant_envelope_cannot_read_another_work_items_object(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    """Against the whole stack (emulator, Azurite, host): the envelope of work item B, rewritten to name
    work item A and sent into A's session ahead of A's own message, is dead-lettered access_denied;
    A still completes with A's own document, B with B's (before: B's bytes became A's result, A's real
    message completed as a "duplicate", and B's object was cleaned up under it: payload_missing)."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    item_a, item_b = f"wi-a-{uuid.uuid4().hex[:12]}", f"wi-b-{uuid.uuid4().hex[:12]}"
    # Both sessions are held (as a second consumer would) so nothing is consumed while the test forges.
    with (
        bus.get_queue_receiver("documents", session_id=item_b) as hold_b,
        bus.get_queue_receiver("documents", session_id=item_a) as hold_a,
    ):
        hold_b.peek_messages(max_message_count=1)
        hold_a.peek_messages(max_message_count=1)
        submit(
            stack,
            (SAMPLES / "service-agreement.txt").read_bytes(),
            tenant=tenant,
            work_item_id=item_b,
            classification="confidential",
        )
        [queued_b] = hold_b.peek_messages(max_message_count=1)
        envelope = json.loads(b"".join(queued_b.body))
        forged_message_id = f"forged-{uuid.uuid4().hex[:8]}"
        forged = {**envelope, "work_item_id": item_a}
        with bus.get_queue_sender("documents") as sender:
            sender.send_messages(
                ServiceBusMessage(
                    json.dumps(forged).encode(),
                    session_id=item_a,
                    message_id=forged_message_id,
                    content_type="application/json",
                    application_properties=dict(queued_b.application_properties or {}),
                )
            )
        submit(
            stack,
            (SAMPLES / "urgent-notice.txt").read_bytes(),
            tenant=tenant,
            work_item_id=item_a,
            classification="confidential",
        )
    views = wait_for_states(stack, [item_a, item_b])
    wait_until(
        lambda: any(message.message_id == forged_message_id for message in dead_letters(bus)),
        "the forged envelope was not dead-lettered",
    )
    [dead] = [message for message in dead_letters(bus) if message.message_id == forged_message_id]
    assert dead.dead_letter_reason == "access_denied"
    # A's result is urgent-notice.txt's (high priority, not a contract), B's the service agreement's.
    assert (views[item_a]["result"]["priority"], views[item_a]["result"]["document_type"]) != (
        "normal",
        "contract",
    )
    assert views[item_a]["result"]["priority"] == "high"
    assert (views[item_b]["result"]["priority"], views[item_b]["result"]["document_type"]) == (
        "normal",
        "contract",
    )
    # B's own sync cleanup, after B's own effect and once its message is completed (so just after the
    # work item reads completed).
    wait_until(
        lambda: wait_for_states(stack, [item_b])[item_b]["payload_state"] == "removed",
        "B's object was not removed after its message was completed",
    )
