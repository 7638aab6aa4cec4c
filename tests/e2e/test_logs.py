"""End to end: no payload bytes, keys, SAS tokens, bearer tokens or signatures in any log the stack writes.

This test makes the stack log its own markers and scans at once. It need not run last: the session's
``stack`` fixture scans every log again when the stack stops (tests/e2e/log_scan.py), covering what
every other test made it log (kills, restarts, retries, dead letters, replays) and this test's markers.
"""

from __future__ import annotations

import base64
import json
import uuid

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from local.stack import LocalStack

from .journey import SAMPLES, auth, dead_letters, submit, wait_for_states, wait_until
from .log_scan import SESSION_NEEDLES, banners_of, forms_of, leaks, stack_logs


def test_no_payload_bytes_keys_or_sas_tokens_in_any_log(stack: LocalStack, bus: ServiceBusClient) -> None:
    """Documents and broken messages carrying a unique marker are processed; no log holds the marker
    (as text or base64), an account key, a SAS key or a SAS signature, a bearer token (valid or
    forged) or any part of its claims or signature."""
    marker = f"MARKER-{uuid.uuid4().hex}"
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    document = (SAMPLES / "service-agreement.txt").read_bytes() + f"\n{marker}\n".encode()
    inline = submit(stack, document, tenant=tenant)
    by_reference = submit(stack, document, tenant=tenant, classification="confidential")
    assert (inline["receipt"]["transport"], by_reference["receipt"]["transport"]) == ("inline", "reference")
    refused = requests.post(
        f"{stack.api_url}/documents",
        data=b"%PDF-not-really " + marker.encode(),
        headers={
            **auth(stack),
            "X-Tenant-Id": tenant,
            "X-Purpose": "bulk-ingest",
            "X-Classification": "secret",
        },
        timeout=60,
    )
    assert refused.status_code == 400
    # A valid token and a forged one (its signature a marker): neither may reach any log.
    valid = auth(stack)
    header_and_claims = valid["Authorization"].removeprefix("Bearer ").rsplit(".", 1)[0]
    forged_signature = base64.urlsafe_b64encode(f"SIG-{marker}".encode()).decode().rstrip("=")
    forged = {"Authorization": f"Bearer {header_and_claims}.{forged_signature}"}
    for headers in (valid, forged):
        requests.get(f"{stack.api_url}/work-items/wi-log-{uuid.uuid4().hex[:8]}", headers=headers, timeout=30)
    token_parts = [*valid["Authorization"].split(".")[1:], forged_signature]
    needles = [*forms_of(marker), *token_parts]
    SESSION_NEEDLES.extend(needles)  # the end-of-session scan looks for them again
    not_json = f"{{not json {marker}".encode()
    not_an_envelope = json.dumps({"schema_version": "1.0", "payload_inline": marker}).encode()
    broken = {f"bad-{uuid.uuid4().hex}": body for body in (not_json, not_an_envelope)}
    with bus.get_queue_sender("documents") as sender:
        for message_id, body in broken.items():
            sender.send_messages(ServiceBusMessage(body, message_id=message_id, session_id=message_id))
    wait_for_states(stack, [inline["work_item_id"], by_reference["work_item_id"]])
    wait_until(
        lambda: set(broken) <= {message.message_id for message in dead_letters(bus)},
        "the broken messages were not dead-lettered",
    )

    logs = stack_logs(stack.work_dir, banners_of(stack))
    expected_logs = {"functions-host.log", "servicebus.log", "azurite.log", "identity.log"}
    assert {path.name for path in logs} >= expected_logs
    assert any("completed " + by_reference["work_item_id"] in text for text in logs.values())
    assert leaks(logs, stack.work_dir, needles) == []
