"""End to end: intake while Storage (Azurite) is down answers 503 `unavailable` with Retry-After, like the
read routes, and the same request (same Idempotency-Key) succeeds once when storage is back.

Azurite is stopped (connection refused: what an unreachable account looks like to the SDK), and in the
second case its table port answers every request 503 ServerBusy (a store that answers but cannot serve
now). Before the fix ``POST /documents`` and the upload commit answered both 500. A grant needs no storage
call locally (the local stack signs it with Azurite's account key; on Azure it asks for a user delegation
key: tests/integration/claimcheck/test_user_delegation.py), so it is answered 201 during the outage.
"""

from __future__ import annotations

import hashlib
import io
import time
import uuid

import pytest
import requests
from claimcheck.blob_upload import put_blocks

from local.stack import LocalStack

from .journey import SAMPLES, auth, wait_for_states
from .storage_down import storage_down

# Generous on a shared 2-core machine (the storage SDK retries a refused connection with backoff before
# the adapters call it an outage); observed answer times are printed, not asserted.
ANSWER_BOUND_SECONDS = 240.0


def _intake_headers(tenant: str, key: str) -> dict[str, str]:
    return {
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "internal",
        "Idempotency-Key": key,
    }


def _post(url: str, headers: dict[str, str], body: bytes = b"") -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = requests.post(url, data=body, headers=headers, timeout=ANSWER_BOUND_SECONDS)
    return response, time.monotonic() - started


def _assert_unavailable(response: requests.Response, route: str) -> None:
    assert response.status_code == 503, f"{route}: {response.status_code} {response.text}"
    assert int(response.headers["Retry-After"]) >= 1, route
    body = response.json()
    assert body["error"] == "unavailable", route
    assert set(body) == {"error", "message"}, route
    assert "http" not in body["message"].lower(), route  # no URL (nor a grant) in the answer


@pytest.mark.parametrize("how", ["unreachable", "busy"])
def test_intake_and_commit_answer_503_while_storage_is_down_and_succeed_once_after(
    stack: LocalStack, how: str
) -> None:
    tenant = f"t-so-{uuid.uuid4().hex[:8]}"
    document = (SAMPLES / "service-agreement.txt").read_bytes() * 20  # by reference, not inline
    staged = (SAMPLES / "service-agreement.txt").read_bytes() + b"\nstaged copy\n"
    # The direct upload's grant and bytes before the outage; its commit during it.
    upload_headers = {
        "X-Upload-Content-Type": "text/plain",
        "X-Upload-Length": str(len(staged)),
    }
    grant_headers = auth(stack) | _intake_headers(tenant, "unused") | upload_headers
    del grant_headers["Idempotency-Key"]
    granted = requests.post(f"{stack.api_url}/uploads", headers=grant_headers, timeout=60)
    assert granted.status_code == 201, granted.text
    grant = granted.json()
    put_blocks(grant["upload_url"], io.BytesIO(staged), block_bytes=4096, timeout=30)
    commit_url = f"{stack.api_url}/uploads/{grant['upload_id']}/commit"
    commit_headers = upload_headers | {"X-Upload-Sha256": hashlib.sha256(staged).hexdigest()}
    intake_key, commit_key = uuid.uuid4().hex, uuid.uuid4().hex

    def intake() -> tuple[requests.Response, float]:
        headers = auth(stack) | _intake_headers(tenant, intake_key) | {"Content-Type": "text/plain"}
        return _post(f"{stack.api_url}/documents", headers, document)

    def commit() -> tuple[requests.Response, float]:
        return _post(commit_url, auth(stack) | _intake_headers(tenant, commit_key) | commit_headers)

    with storage_down(stack, how):
        refused_intake, intake_seconds = intake()
        refused_commit, commit_seconds = commit()
        during_grant = requests.post(f"{stack.api_url}/uploads", headers=grant_headers, timeout=60)
    print(
        f"storage {how}: POST /documents answered in {intake_seconds:.1f} s, commit in {commit_seconds:.1f} s"
    )
    _assert_unavailable(refused_intake, "POST /documents")
    _assert_unavailable(refused_commit, "commit")
    assert during_grant.status_code == 201, during_grant.text  # signed locally, no storage call

    # Storage is back: the same requests are accepted, once; a second send replays the first receipt.
    accepted_intake, _ = intake()
    assert accepted_intake.status_code == 202, accepted_intake.text
    accepted_commit, _ = commit()
    assert accepted_commit.status_code == 202, accepted_commit.text
    for again, first in ((intake()[0], accepted_intake), (commit()[0], accepted_commit)):
        assert (again.status_code, again.headers.get("Idempotent-Replayed")) == (202, "true")
        assert again.json()["receipt"] == first.json()["receipt"]
    accepted = [accepted_intake.json()["work_item_id"], accepted_commit.json()["work_item_id"]]
    assert len(set(accepted)) == 2
    wait_for_states(stack, accepted)
