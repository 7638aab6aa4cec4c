"""The read-after-write seed's cases over the HTTP API of the local stack (docs/architecture.md §8).

A lagging write path is a real alternative ``Bus`` behind the producer's port (``HeldBroker`` in
conftest.py: a broker
slow to confirm a publish), not a patched function: while it holds, the version is reserved but not
visible, exactly as when Service Bus is slow on Azure.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import requests
from azure.data.tables import TableClient, TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient
from claimcheck import ClaimCheck
from claimcheck.settings import PAYLOAD_CONTAINER, REGISTRY_TABLE, WORK_ITEMS_TABLE, Settings

from local.stack import LocalStack

from .conftest import VISIBILITY_WINDOW_SECONDS, HeldBroker
from .journey import SAMPLES, auth, wait_until
from .storage_down import storage_down

DOCUMENT = (SAMPLES / "service-agreement.txt").read_bytes()
OTHER_DOCUMENT = (SAMPLES / "urgent-notice.txt").read_bytes()


def _tenant() -> str:
    return f"t-raw-{uuid.uuid4().hex[:8]}"


def _post(
    stack: LocalStack,
    body: bytes,
    tenant: str,
    *,
    work_item_id: str | None = None,
    key: str | None = None,
    if_match: str | None = None,
) -> requests.Response:
    headers = {
        **auth(stack),
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "confidential",  # always by reference: an object and a registry record
        "Content-Type": "text/plain",
    }
    for name, value in (("X-Work-Item-Id", work_item_id), ("Idempotency-Key", key), ("If-Match", if_match)):
        if value is not None:
            headers[name] = value
    return requests.post(f"{stack.api_url}/documents", data=body, headers=headers, timeout=60)


def _read(
    stack: LocalStack, work_item_id: str, min_version: int | None = None, etag: str | None = None
) -> requests.Response:
    headers = {**auth(stack), **({"If-None-Match": etag} if etag else {})}
    params = {} if min_version is None else {"min_version": str(min_version)}
    return requests.get(
        f"{stack.api_url}/work-items/{work_item_id}", params=params, headers=headers, timeout=30
    )


def _settled(stack: LocalStack, work_item_id: str) -> requests.Response:
    """The status once nothing will change it any more: completed, its object cleaned up (or inline)."""
    reads: list[requests.Response] = []

    def settled() -> bool:
        reads.append(_read(stack, work_item_id))
        body = reads[-1].json()
        return body.get("state") == "completed" and body.get("payload_state") in (None, "removed")

    wait_until(settled, "the work item completed and cleaned up", timeout=90)
    return reads[-1]


def _answer(response: requests.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["visibility"], body["next_action"]


def _registry_rows(stack: LocalStack, work_item_id: str) -> int:
    tables = TableServiceClient.from_connection_string(stack.storage_connection_string)
    rows = tables.get_table_client(REGISTRY_TABLE).query_entities(
        "work_item_id eq @id", parameters={"id": work_item_id}
    )
    return len(list(rows))


def _work_items_table(stack: LocalStack) -> TableClient:
    tables = TableServiceClient.from_connection_string(stack.storage_connection_string)
    return tables.get_table_client(WORK_ITEMS_TABLE)


def test_accepted_write_then_immediate_read(stack: LocalStack) -> None:
    """Seed 1: the read right after the 202 sees the version (never 404), with an ETag; a version never
    written is unknown_version (404, stop), not awaiting_visibility."""
    accepted = _post(stack, DOCUMENT, _tenant())
    assert accepted.status_code == 202, accepted.text
    receipt = accepted.json()["receipt"]
    read = _read(stack, receipt["work_item_id"], receipt["version"])
    assert read.status_code == 200
    assert read.json()["visibility"] == "version_confirmed"
    assert read.json()["version"] >= receipt["version"]
    assert read.headers["ETag"].startswith(f'"v{read.json()["version"]}-')
    if read.json()["next_action"] == "wait":
        assert int(read.headers["Retry-After"]) == read.json()["retry_after"] >= 1
    else:
        assert read.json()["next_action"] == "proceed"
    never = _read(stack, receipt["work_item_id"], receipt["version"] + 5)
    assert (never.status_code, never.json()["error"], never.json()["next_action"]) == (
        404,
        "unknown_version",
        "stop",
    )


def test_min_version_zero_asks_for_no_particular_version_and_is_never_a_conflict(stack: LocalStack) -> None:
    """The contract takes min_version 0 ("at least version 0", ASCII digits). Found in review: it
    answered conflict_detected / re_read for a work item nobody replaced (no version 0 was ever
    written, so it counted as "replaced"), and an agent told to re-read gets the same answer forever."""
    accepted = _post(stack, DOCUMENT, _tenant())
    assert accepted.status_code == 202, accepted.text
    read = _read(stack, accepted.json()["work_item_id"], 0)
    status, visibility, next_action = _answer(read)
    assert (status, visibility) == (200, "version_confirmed"), read.text
    assert next_action in ("wait", "proceed")


def test_stale_reads_while_the_write_is_not_visible_wait_then_confirm(
    stack: LocalStack, held_broker: HeldBroker
) -> None:
    """Seeds 2 and 3: while the version is reserved but not yet in the index, two reads in a row answer
    awaiting_visibility with wait + Retry-After (never 404 / "not executed"); once the publish is
    confirmed the same read answers version_confirmed."""
    work_item_id, tenant = f"wi-{uuid.uuid4().hex}", _tenant()
    producer = ClaimCheck.from_settings(
        Settings(environment="local"), storage_connection=stack.storage_connection_string, bus=held_broker
    ).producer
    with ThreadPoolExecutor(max_workers=1) as pool:
        intake = pool.submit(
            producer.submit,
            DOCUMENT,
            tenant_id=tenant,
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        assert held_broker.entered.wait(60), "the producer never reached its publish"
        stale = [_read(stack, work_item_id, 1) for _ in range(2)]
        held_broker.release.set()
        receipt = intake.result(timeout=60)
    for read in stale:
        assert _answer(read) == (200, "awaiting_visibility", "wait")
        assert int(read.headers["Retry-After"]) == read.json()["retry_after"] >= 1
    assert _answer(_read(stack, work_item_id, receipt.version))[:2] == (200, "version_confirmed")


def test_visibility_deadline_exceeded_then_propagation_completes_late(
    stack: LocalStack, held_broker: HeldBroker
) -> None:
    """Seeds 7 and 12: past the visibility deadline an unconfirmed version is propagation_exceeded
    (reconcile), not awaiting_visibility forever; a publish confirmed after that reads as confirmed."""
    work_item_id = f"wi-{uuid.uuid4().hex}"
    producer = ClaimCheck.from_settings(
        Settings(environment="local"), storage_connection=stack.storage_connection_string, bus=held_broker
    ).producer
    with ThreadPoolExecutor(max_workers=1) as pool:
        intake = pool.submit(
            producer.submit,
            DOCUMENT,
            tenant_id=_tenant(),
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        assert held_broker.entered.wait(60), "the producer never reached its publish"
        assert _answer(_read(stack, work_item_id, 1))[1] == "awaiting_visibility"
        time.sleep(VISIBILITY_WINDOW_SECONDS + 1)
        exceeded = _read(stack, work_item_id, 1)
        held_broker.release.set()
        intake.result(timeout=60)
    assert _answer(exceeded) == (200, "propagation_exceeded", "reconcile")
    assert "Retry-After" not in exceeded.headers
    # docs/architecture.md §8: the read that found it exceeded raised a reconciliation entry for (work
    # item, version 1).
    entry = _work_items_table(stack).get_entity(work_item_id, "propagation-exceeded-0000000001")
    assert entry["entry_state"] == "open"
    assert _answer(_read(stack, work_item_id, 1))[:2] == (200, "version_confirmed")


def test_newer_version_by_someone_else_is_a_conflict(stack: LocalStack) -> None:
    """Seed 5: B writes version 2 over A's version 1; A's write based on version 1 is a 412
    conflict_detected naming version 2, nothing is overwritten, and A's read of version 1 says re_read."""
    tenant, work_item_id = _tenant(), f"wi-{uuid.uuid4().hex}"
    assert _post(stack, DOCUMENT, tenant, work_item_id=work_item_id).status_code == 202
    seen_by_a = _read(stack, work_item_id, 1).headers["ETag"]
    by_b = _post(stack, OTHER_DOCUMENT, tenant, work_item_id=work_item_id, if_match="1")
    assert by_b.status_code == 202, by_b.text
    by_a = _post(stack, DOCUMENT + b" edited", tenant, work_item_id=work_item_id, if_match=seen_by_a)
    assert (by_a.status_code, by_a.json()["error"], by_a.json()["current_version"]) == (
        412,
        "conflict_detected",
        2,
    )
    assert _answer(_read(stack, work_item_id, 1))[1:] == ("conflict_detected", "re_read")
    latest = _read(stack, work_item_id).json()
    assert (latest["version"], latest["latest_receipt"]["sha256"]) == (2, by_b.json()["receipt"]["sha256"])


def test_timeout_after_write_then_retry_with_the_same_key(stack: LocalStack, bus: ServiceBusClient) -> None:
    """Seed 6: the answer to the first request is lost; the retry with the same Idempotency-Key gets the
    original receipt: one registry record, one message. A retry without a key cannot silently write
    version 2 either: it needs If-Match (428)."""
    tenant, work_item_id, key = _tenant(), f"wi-{uuid.uuid4().hex}", uuid.uuid4().hex
    with bus.get_queue_receiver("documents", session_id=work_item_id) as hold:
        hold.peek_messages(max_message_count=1)  # keeps the consumer away while the queue is counted
        first = _post(stack, DOCUMENT, tenant, work_item_id=work_item_id, key=key)
        retry = _post(stack, DOCUMENT, tenant, work_item_id=work_item_id, key=key)
        unkeyed = _post(stack, DOCUMENT, tenant, work_item_id=work_item_id)
        queued = hold.peek_messages(max_message_count=10)
    assert (first.status_code, retry.status_code) == (202, 202)
    assert retry.json() == first.json()
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert (unkeyed.status_code, unkeyed.json()["error"]) == (428, "precondition_required")
    assert len(queued) == 1
    assert _registry_rows(stack, work_item_id) == 1


def test_a_retry_in_a_new_span_of_the_trace_gets_the_original_receipt(stack: LocalStack) -> None:
    """Found by review: an instrumented HTTP client sends each attempt in its own span, so a retry with
    the same key and the same document carries another traceparent (and maybe tracestate). That is
    trace context, not content: the retry answers the first receipt instead of 409 idempotency_key_reused."""
    tenant, key, trace = _tenant(), uuid.uuid4().hex, uuid.uuid4().hex
    headers = {
        **auth(stack),
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "confidential",
        "Content-Type": "text/plain",
        "Idempotency-Key": key,
    }
    attempts = [
        requests.post(
            f"{stack.api_url}/documents",
            data=DOCUMENT,
            headers=headers | {"traceparent": f"00-{trace}-{span:016x}-01", "tracestate": f"cc=a{span}"},
            timeout=60,
        )
        for span in (1, 2)
    ]
    assert [attempt.status_code for attempt in attempts] == [202, 202], attempts[1].text
    assert attempts[1].json() == attempts[0].json()
    assert attempts[1].headers["Idempotent-Replayed"] == "true"


def test_retry_with_the_same_key_and_other_content_is_refused(stack: LocalStack) -> None:
    """Seed 8: a key reused for other content is a 409 idempotency_key_reused; nothing is written."""
    tenant, key = _tenant(), uuid.uuid4().hex
    first = _post(stack, DOCUMENT, tenant, key=key)
    reused = _post(stack, OTHER_DOCUMENT, tenant, key=key)
    assert (reused.status_code, reused.json()["error"]) == (409, "idempotency_key_reused")
    work_item_id = first.json()["work_item_id"]
    assert _read(stack, work_item_id).json()["version"] == 1
    assert _registry_rows(stack, work_item_id) == 1


def test_retry_with_another_key_for_the_same_content_is_a_conflict(stack: LocalStack) -> None:
    """Seed 9: version 2 written under one key; the retry under a new key (same content, same If-Match)
    is a 412 conflict_detected instead of a version 3."""
    tenant, work_item_id = _tenant(), f"wi-{uuid.uuid4().hex}"
    assert _post(stack, DOCUMENT, tenant, work_item_id=work_item_id).status_code == 202
    second = _post(stack, OTHER_DOCUMENT, tenant, work_item_id=work_item_id, key="k-1", if_match="1")
    again = _post(stack, OTHER_DOCUMENT, tenant, work_item_id=work_item_id, key="k-2", if_match="1")
    assert second.status_code == 202
    assert (again.status_code, again.json()["error"], again.json()["current_version"]) == (
        412,
        "conflict_detected",
        2,
    )
    assert _read(stack, work_item_id).json()["version"] == 2
    assert _registry_rows(stack, work_item_id) == 2


def test_a_cached_old_answer_is_not_confirmed_as_current(stack: LocalStack) -> None:
    """Seed 10: a client holding version 1's answer (its ETag) gets 304 only while nothing changed; after
    version 2 the same If-None-Match gets the new answer, and the ETag works as If-Match."""
    tenant, work_item_id = _tenant(), f"wi-{uuid.uuid4().hex}"
    assert _post(stack, DOCUMENT, tenant, work_item_id=work_item_id).status_code == 202
    cached = _settled(stack, work_item_id)  # processing changes the answer until the cleanup is done
    assert cached.headers["Cache-Control"] == "no-cache"  # shared caches must revalidate, never serve it
    etag = cached.headers["ETag"]
    unchanged = _read(stack, work_item_id, etag=etag)
    assert (unchanged.status_code, unchanged.content) == (304, b"")
    second = _post(stack, OTHER_DOCUMENT, tenant, work_item_id=work_item_id, if_match=etag)
    assert second.status_code == 202, second.text
    fresh = _read(stack, work_item_id, etag=etag)
    assert fresh.status_code == 200
    assert fresh.json()["version"] == 2
    assert fresh.headers["ETag"] != etag


def test_strong_read_unavailable_is_a_503_to_wait_never_a_stale_answer(stack: LocalStack) -> None:
    """Seed 11: with the authoritative store down, the status read answers 503 unavailable with
    next_action wait and Retry-After (within seconds, not after the SDK's default retries); once the
    store is back, the same read answers the version."""
    accepted = _post(stack, DOCUMENT, _tenant())
    assert accepted.status_code == 202, accepted.text
    work_item_id = accepted.json()["work_item_id"]
    # A clean stop (Azurite flushes its data, as LocalStack.restart does), so only reachability changes.
    stack.taken_down.add("azurite")
    stack.azurite.stop(flush=True)
    try:
        down = _read(stack, work_item_id, 1)
    finally:
        stack.start("azurite")
    assert (down.status_code, down.json()["error"]) == (503, "unavailable"), down.text
    assert down.json()["next_action"] == "wait"
    assert int(down.headers["Retry-After"]) == down.json()["retry_after"] >= 1
    assert _answer(_read(stack, work_item_id, 1))[:2] == (200, "version_confirmed")


def test_a_busy_store_is_a_503_to_wait_like_an_unreachable_one(stack: LocalStack) -> None:
    """Found in review: a store that answers but refuses for now (503 ServerBusy, 500, 429 throttling)
    made the status and result reads answer 500 (only an unreachable store was an outage), so an agent
    got no next_action and no Retry-After. The table port answers 503 while Azurite is stopped."""
    accepted = _post(stack, DOCUMENT, _tenant())
    assert accepted.status_code == 202, accepted.text
    work_item_id = accepted.json()["work_item_id"]
    with storage_down(stack, "busy"):
        status = _read(stack, work_item_id, 1)
        result = requests.get(
            f"{stack.api_url}/work-items/{work_item_id}/result", headers=auth(stack), timeout=60
        )
    assert (status.status_code, status.json()["error"], status.json()["next_action"]) == (
        503,
        "unavailable",
        "wait",
    ), status.text
    assert int(status.headers["Retry-After"]) == status.json()["retry_after"] >= 1
    assert (result.status_code, result.json()["error"]) == (503, "unavailable"), result.text
    assert int(result.headers["Retry-After"]) >= 1
    assert _answer(_read(stack, work_item_id, 1))[:2] == (200, "version_confirmed")


def test_a_version_whose_object_is_gone_needs_reconciliation(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    """The stored object of an accepted version disappears before processing: the consumer dead-letters
    it and the status answers needs_reconciliation with next_action reconcile (not proceed, not wait)."""
    work_item_id = f"wi-{uuid.uuid4().hex}"
    with bus.get_queue_receiver("documents", session_id=work_item_id) as hold:
        hold.peek_messages(max_message_count=1)  # the consumer waits until the object is gone
        accepted = _post(stack, DOCUMENT, _tenant(), work_item_id=work_item_id)
        assert accepted.status_code == 202, accepted.text
        blobs = BlobServiceClient.from_connection_string(stack.storage_connection_string)
        blobs.get_container_client(PAYLOAD_CONTAINER).delete_blob(accepted.json()["receipt"]["payload_ref"])
    wait_until(
        lambda: _read(stack, work_item_id, 1).json()["state"] in ("failed", "completed"),
        "the consumer never settled the version whose object is gone",
        timeout=150,
    )
    assert _answer(_read(stack, work_item_id, 1)) == (200, "needs_reconciliation", "reconcile")
