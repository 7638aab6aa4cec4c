"""The Function App's HTTP API on the local stack: multipart intake, clear 4xx errors, status reads."""

from __future__ import annotations

import uuid

import pytest
import requests

from local.stack import LocalStack

from .conftest import MAX_PAYLOAD_BYTES
from .journey import SAMPLES, auth, wait_for_states

VALID = {
    "X-Tenant-Id": "t-http-api",
    "X-Purpose": "contract-review",
    "X-Classification": "internal",
    "Content-Type": "text/plain",
}


@pytest.mark.parametrize(
    ("changes", "body", "status", "error"),
    [
        ({"X-Tenant-Id": None}, b"text", 400, "missing_tenant"),
        ({"X-Purpose": "gossip"}, b"text", 400, "unknown_purpose"),
        ({"Content-Type": "application/x-msdownload"}, b"MZ\x90\x00", 415, "forbidden_content_type"),
        ({}, b"x" * (MAX_PAYLOAD_BYTES + 1), 413, "payload_too_large"),
        ({"X-Review-Required": "maybe"}, b"text", 400, "bad_request"),
    ],
)
def test_bad_intake_gets_a_4xx_naming_the_problem(
    stack: LocalStack, changes: dict[str, str | None], body: bytes, status: int, error: str
) -> None:
    """Missing tenant, unknown purpose, forbidden type, oversize body, non-boolean flag: a JSON 4xx."""
    sent = {**VALID, **auth(stack), **changes}
    headers = {name: value for name, value in sent.items() if value is not None}
    response = requests.post(f"{stack.api_url}/documents", data=body, headers=headers, timeout=60)
    assert response.status_code == status
    assert response.json()["error"] == error
    assert response.json()["message"]


def test_multipart_intake_with_form_fields(stack: LocalStack) -> None:
    """A multipart upload carries the document in its 'document' part and the metadata as fields."""
    response = requests.post(
        f"{stack.api_url}/documents",
        files={
            "document": ("supply.pdf", (SAMPLES / "supply-agreement.pdf").read_bytes(), "application/pdf")
        },
        data={
            "tenant_id": f"t-{uuid.uuid4().hex[:8]}",
            "purpose": "contract-review",
            "classification": "internal",
        },
        headers=auth(stack),
        timeout=60,
    )
    assert response.status_code == 202, response.text
    work_item_id = response.json()["work_item_id"]
    assert response.headers["Location"] == response.json()["status_url"] == f"/api/work-items/{work_item_id}"
    views = wait_for_states(stack, [work_item_id])
    assert views[work_item_id]["result"]["page_count"] == 3


def test_status_of_unknown_work_item_is_404_and_bad_min_version_is_400(stack: LocalStack) -> None:
    """Unknown ids answer 404; a min_version that is not a number answers 400."""
    api, headers = stack.api_url, auth(stack)
    assert requests.get(f"{api}/work-items/wi-unknown", headers=headers, timeout=30).status_code == 404
    bad_version = requests.get(f"{api}/work-items/wi-x?min_version=abc", headers=headers, timeout=30)
    assert bad_version.status_code == 400


def test_status_never_contains_payload_bytes(stack: LocalStack) -> None:
    """The status view reports states, receipt and summary, but not the document's text."""
    document = (SAMPLES / "service-agreement.txt").read_bytes()
    headers = {**VALID, **auth(stack), "X-Tenant-Id": f"t-{uuid.uuid4().hex[:8]}"}
    work_item_id = requests.post(
        f"{stack.api_url}/documents", data=document, headers=headers, timeout=60
    ).json()["work_item_id"]
    wait_for_states(stack, [work_item_id])
    status = requests.get(f"{stack.api_url}/work-items/{work_item_id}", headers=auth(stack), timeout=30).text
    assert document.decode().splitlines()[0] not in status


def test_ids_are_validated_alike_on_every_route_before_storage(stack: LocalStack) -> None:
    """A 60,000-character id is the same 400 on the status route as on intake (it never reaches storage)."""
    long_id = "x" * 60_000
    status = requests.get(f"{stack.api_url}/work-items/{long_id}", headers=auth(stack), timeout=30)
    intake = requests.post(
        f"{stack.api_url}/documents",
        data=b"text",
        headers={**VALID, **auth(stack), "X-Work-Item-Id": long_id},
        timeout=30,
    )
    assert status.status_code == intake.status_code == 400
    assert status.json() == intake.json()
    assert status.json()["error"] == "invalid_request"


def test_min_version_must_be_ascii_digits(stack: LocalStack) -> None:
    """'²' passes str.isdigit(); it is still a 400, not a 500."""
    response = requests.get(
        f"{stack.api_url}/work-items/wi-x", params={"min_version": "²"}, headers=auth(stack), timeout=30
    )
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


def test_route_ids_arrive_url_decoded(stack: LocalStack) -> None:
    """'order%3A42' is the work item 'order:42', as on Azure."""
    response = requests.get(f"{stack.api_url}/work-items/order%3A42", headers=auth(stack), timeout=30)
    assert response.status_code == 404
    assert response.json()["message"] == "no work item order:42"
