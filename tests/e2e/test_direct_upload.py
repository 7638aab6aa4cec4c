"""Direct upload over the local stack (claimcheck.uploads, functions/upload_routes.py): a write-only
grant to one staging blob in Azurite, the bytes straight to storage, and a commit that verifies length
and sha256 while the producer stores its own copy; the same gate, idempotency and errors as intake."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from azure.data.tables import TableServiceClient
from azure.storage.blob import ContainerClient
from claimcheck.blob_upload import put_blocks
from claimcheck.client import ClaimCheckClient
from claimcheck.settings import PAYLOAD_CONTAINER, WORK_ITEMS_TABLE
from claimcheck.uploads import STAGING_PREFIX

from local.stack import LocalStack

from .conftest import MAX_PAYLOAD_BYTES
from .journey import SAMPLES, TEST_IDENTITY, auth
from .log_scan import GRANT_SHAPE, SESSION_NEEDLES, leaks

SAMPLE = SAMPLES / "service-agreement.txt"


def _metadata(tenant: str, length: int, **extra: str) -> dict[str, str]:
    return {
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "confidential",
        "X-Upload-Content-Type": "text/plain",
        "X-Upload-Length": str(length),
        **extra,
    }


def _grant(stack: LocalStack, tenant: str, length: int, identity: str = TEST_IDENTITY) -> requests.Response:
    headers = auth(stack, identity) | _metadata(tenant, length)
    return requests.post(f"{stack.api_url}/uploads", headers=headers, timeout=60)


def _remember_signature(grant: dict[str, Any]) -> None:
    """The end-of-session log scan looks for this grant's signature in every log of the stack."""
    (signature,) = urllib.parse.parse_qs(urllib.parse.urlsplit(grant["upload_url"]).query)["sig"]
    SESSION_NEEDLES.extend([signature, urllib.parse.quote(signature, safe="")])


def _staging(stack: LocalStack) -> list[str]:
    container = ContainerClient.from_connection_string(stack.storage_connection_string, PAYLOAD_CONTAINER)
    return [blob.name for blob in container.list_blobs(name_starts_with=STAGING_PREFIX)]


def test_client_above_its_threshold_uploads_directly_and_the_document_is_processed(stack: LocalStack) -> None:
    client = ClaimCheckClient(stack.api_url, lambda: stack.token(TEST_IDENTITY), direct_upload_threshold=0)
    tenant = f"t-up-{uuid.uuid4().hex[:8]}"
    receipt = client.submit(
        SAMPLE,
        tenant_id=tenant,
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    assert receipt.raw["receipt"]["sha256"] == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    assert receipt.raw["receipt"]["transport"] == "reference"
    final = client.wait(receipt, deadline_seconds=150)
    assert (final.visibility, final.next_action) == ("version_confirmed", "proceed")


def test_commit_verifies_sha256_and_length_and_is_idempotent(stack: LocalStack) -> None:
    tenant, document = f"t-up-{uuid.uuid4().hex[:8]}", SAMPLE.read_bytes()
    granted = _grant(stack, tenant, len(document))
    assert granted.status_code == 201, granted.text
    assert granted.headers["Cache-Control"] == "no-store"
    grant = granted.json()
    _remember_signature(grant)
    length, sha256 = put_blocks(grant["upload_url"], _stream(document), block_bytes=1024, timeout=30)
    assert (length, sha256) == (len(document), hashlib.sha256(document).hexdigest())
    commit = f"{stack.api_url}/uploads/{grant['upload_id']}/commit"
    base = auth(stack) | _metadata(tenant, length)

    wrong = requests.post(commit, headers=base | {"X-Upload-Sha256": "0" * 64}, timeout=120)
    assert (wrong.status_code, wrong.json()["error"]) == (422, "upload_mismatch")
    longer_headers = auth(stack) | _metadata(tenant, length + 1, **{"X-Upload-Sha256": sha256})
    longer = requests.post(commit, headers=longer_headers, timeout=60)
    assert (longer.status_code, longer.json()["error"]) == (422, "upload_mismatch")
    # Another caller (or the same caller for another tenant) finds no such upload.
    other = auth(stack, "local-producer") | _metadata("acme", length, **{"X-Upload-Sha256": sha256})
    assert requests.post(commit, headers=other, timeout=60).status_code == 404
    committed = requests.post(commit, headers=base | {"X-Upload-Sha256": sha256}, timeout=120)
    assert committed.status_code == 202, committed.text
    assert committed.json()["receipt"]["sha256"] == sha256
    # Committed: the staging blob is gone, and a second commit answers the first receipt (one upload,
    # one document), or 409 with other metadata; it never stores anything again.
    again = requests.post(commit, headers=base | {"X-Upload-Sha256": sha256}, timeout=60)
    assert (again.status_code, again.headers["Idempotent-Replayed"]) == (202, "true")
    assert again.json() == committed.json()
    other_metadata = base | {"X-Upload-Sha256": sha256, "X-Priority": "high"}
    refused = requests.post(commit, headers=other_metadata, timeout=60)
    assert (refused.status_code, refused.json()["error"]) == (409, "idempotency_key_reused")
    assert not any(name for name in _staging(stack) if grant["upload_id"] in name)


def test_a_keyed_commit_answers_the_first_receipt_again(stack: LocalStack) -> None:
    tenant, document = f"t-up-{uuid.uuid4().hex[:8]}", SAMPLE.read_bytes()
    grant = _grant(stack, tenant, len(document)).json()
    _remember_signature(grant)
    _, sha256 = put_blocks(grant["upload_url"], _stream(document), block_bytes=4096, timeout=30)
    headers = auth(stack) | _metadata(tenant, len(document), **{"X-Upload-Sha256": sha256})
    headers["Idempotency-Key"] = uuid.uuid4().hex
    commit = f"{stack.api_url}/uploads/{grant['upload_id']}/commit"
    first = requests.post(commit, headers=headers, timeout=120)
    assert first.status_code == 202, first.text
    replay = requests.post(commit, headers=headers, timeout=60)
    assert replay.status_code == 202
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["receipt"] == first.json()["receipt"]
    other = headers | {"X-Upload-Sha256": "1" * 64}
    reused = requests.post(commit, headers=other, timeout=60)
    assert (reused.status_code, reused.json()["error"]) == (409, "idempotency_key_reused")


def test_concurrent_commits_of_one_upload_store_one_document(stack: LocalStack) -> None:
    """Found by review: four commits of one upload at once (a client retrying a commit that timed out,
    without a key) each stored, published and analysed their own work item. One upload is at most one
    document: the others wait (409 request_in_progress) or answer its receipt, whatever the order."""
    tenant = f"t-up-{uuid.uuid4().hex[:8]}"
    document = b"The Supplier shall deliver the goods within 30 days.\n" * 19_000  # ~1 MiB, several chunks
    grant = _grant(stack, tenant, len(document)).json()
    _remember_signature(grant)
    _, sha256 = put_blocks(grant["upload_url"], _stream(document), block_bytes=256 * 1024, timeout=30)
    headers = auth(stack) | _metadata(tenant, len(document), **{"X-Upload-Sha256": sha256})
    commit = f"{stack.api_url}/uploads/{grant['upload_id']}/commit"
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: requests.post(commit, headers=headers, timeout=120), range(4)))
    outcomes = [(answer.status_code, answer.json().get("error")) for answer in answers]
    assert set(outcomes) <= {(202, None), (409, "request_in_progress")}, outcomes
    accepted = {answer.json()["work_item_id"] for answer in answers if answer.status_code == 202}
    assert len(accepted) == 1, outcomes
    # Once it is committed, the same commit again (no key) answers that document's receipt.
    again = requests.post(commit, headers=headers, timeout=60)
    assert again.status_code == 202, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["work_item_id"] in accepted


def test_a_commit_over_the_limit_is_refused_before_anything_is_read_or_reserved(stack: LocalStack) -> None:
    """Found by review: the grant checks the declared length against the limit, the commit did not. A
    grant for 10 bytes also writes a sparse page blob of 8 MiB (no byte sent); its commit, declaring the
    8 MiB, streamed the staged zeros into the payload store until the limit and only then answered 413,
    having reserved a new work item meanwhile (a row nobody can name, left for ever). Refused first."""
    tenant, size = f"t-up-{uuid.uuid4().hex[:8]}", 8 * 1024 * 1024
    grant = _grant(stack, tenant, 10).json()
    _remember_signature(grant)
    page_blob = {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": str(size)}
    assert _status("PUT", grant["upload_url"], b"", page_blob) == 201
    sha256 = hashlib.sha256(bytes(size)).hexdigest()
    headers = auth(stack) | _metadata(tenant, size, **{"X-Upload-Sha256": sha256})
    refused = requests.post(
        f"{stack.api_url}/uploads/{grant['upload_id']}/commit", headers=headers, timeout=120
    )
    assert (refused.status_code, refused.json()["error"]) == (413, "payload_too_large")
    tables = TableServiceClient.from_connection_string(stack.storage_connection_string)
    reserved = tables.get_table_client(WORK_ITEMS_TABLE).query_entities(
        "tenant_id eq @tenant", parameters={"tenant": tenant}
    )
    assert list(reserved) == []


def test_grants_are_refused_like_intake(stack: LocalStack) -> None:
    tenant = f"t-up-{uuid.uuid4().hex[:8]}"
    anonymous = requests.post(f"{stack.api_url}/uploads", headers=_metadata(tenant, 10), timeout=60)
    assert anonymous.status_code == 401
    assert _grant(stack, "acme", 10).status_code == 403  # local-tests holds only t-* tenants
    too_large = _grant(stack, tenant, MAX_PAYLOAD_BYTES + 1)
    assert (too_large.status_code, too_large.json()["error"]) == (413, "payload_too_large")
    headers = auth(stack) | _metadata(tenant, 10) | {"X-Upload-Content-Type": "image/png"}
    forbidden = requests.post(f"{stack.api_url}/uploads", headers=headers, timeout=60)
    assert (forbidden.status_code, forbidden.json()["error"]) == (415, "forbidden_content_type")
    no_length = auth(stack) | _metadata(tenant, 10) | {"X-Upload-Length": "ten"}
    bad = requests.post(f"{stack.api_url}/uploads", headers=no_length, timeout=60)
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_upload")
    unknown = requests.post(
        f"{stack.api_url}/uploads/up_{'x' * 27}/commit",
        headers=auth(stack) | _metadata(tenant, 10, **{"X-Upload-Sha256": "a" * 64}),
        timeout=60,
    )
    assert (unknown.status_code, unknown.json()["error"]) == (404, "upload_not_found")


def test_the_grant_writes_one_blob_and_reads_nothing(stack: LocalStack) -> None:
    grant = _grant(stack, f"t-up-{uuid.uuid4().hex[:8]}", 10).json()
    _remember_signature(grant)
    url = grant["upload_url"]
    put_blocks(url, _stream(b"0123456789"), block_bytes=10, timeout=30)
    assert _status("GET", url) == 403  # no read permission
    parts = urllib.parse.urlsplit(url)
    elsewhere = urllib.parse.urlunsplit(parts._replace(path=parts.path.rsplit("/", 1)[0] + "/ref_other"))
    assert _status("PUT", elsewhere, b"x", {"x-ms-blob-type": "BlockBlob"}) == 403  # another blob
    assert _status("DELETE", url) == 403


def _status(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(  # noqa: S310 - Azurite on loopback
        url, data=body, method=method, headers={"x-ms-version": "2021-12-02"}
    )
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - Azurite on loopback
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def _stream(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def test_the_log_scan_catches_a_real_grant_in_every_form_a_log_may_write_it(
    stack: LocalStack, tmp_path: Path
) -> None:
    """Positive control of the log-hygiene scan: a real grant's URL written plain, percent-encoded once
    and twice, JSON-escaped, or only its signature value, is reported; a redacted one and prose are not."""
    grant = _grant(stack, f"t-up-{uuid.uuid4().hex[:8]}", 10).json()
    url = grant["upload_url"]
    (signature,) = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["sig"]
    forms = {
        "plain": url,
        "encoded": urllib.parse.quote(url, safe=""),
        "encoded-twice": urllib.parse.quote(urllib.parse.quote(url, safe=""), safe=""),
        "json-escaped": json.dumps({"url": url}).replace("&", "\\u0026"),
    }
    for name, text in forms.items():
        assert GRANT_SHAPE.search(text), name
        log = tmp_path / f"{name}.log"
        log.write_text(f"INFO request to {text} done\n")
        assert f"{name}.log: a SAS signature" in leaks({log: log.read_text()}, tmp_path, [])
    bare = tmp_path / "bare.log"
    bare.write_text(f"value {urllib.parse.quote(signature, safe='')} seen\n")
    assert leaks({bare: bare.read_text()}, tmp_path, [signature, urllib.parse.quote(signature, safe="")])
    for harmless in ("Request URL: 'http://x/b?sv=2021&sig=REDACTED'", "the signature was checked"):
        assert not GRANT_SHAPE.search(harmless)
