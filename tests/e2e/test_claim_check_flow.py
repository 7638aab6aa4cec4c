"""End to end: HTTP intake → documents queue → consumer → results topic, on the real local stack."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from local.stack import LocalStack

from .journey import SAMPLES, auth, dead_letters, result_events, submit, wait_for_states, wait_until


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def test_results_reach_only_the_matching_subscriptions(stack: LocalStack, bus: ServiceBusClient) -> None:
    """A high-priority result reaches notifications; a normal contract reaches contracts and review."""
    tenant = _tenant()
    urgent = submit(stack, (SAMPLES / "urgent-notice.txt").read_bytes(), tenant=tenant)["work_item_id"]
    contract = submit(stack, (SAMPLES / "service-agreement.txt").read_bytes(), tenant=tenant)["work_item_id"]
    wait_for_states(stack, [urgent, contract])
    routed = {(event.work_item_id, event.subscription) for event in result_events(bus, [urgent, contract])}
    assert routed == {
        (urgent, "audit"),
        (urgent, "notifications"),
        (contract, "audit"),
        (contract, "contracts"),
        (contract, "review"),
    }


def test_pdf_over_the_inline_threshold_travels_by_reference(stack: LocalStack) -> None:
    """A large text and a PDF are stored by reference, read back verified and analyzed."""
    tenant = _tenant()
    large = submit(stack, (SAMPLES / "master-agreement-large.txt").read_bytes(), tenant=tenant)
    pdf = submit(
        stack,
        (SAMPLES / "supply-agreement.pdf").read_bytes(),
        tenant=tenant,
        content_type="application/pdf",
        classification="confidential",
    )
    assert (large["receipt"]["transport"], pdf["receipt"]["transport"]) == ("reference", "reference")
    views = wait_for_states(stack, [large["work_item_id"], pdf["work_item_id"]])
    assert views[large["work_item_id"]]["result"]["obligations"] == 120
    assert views[pdf["work_item_id"]]["result"]["page_count"] == 3
    # contract-review cleans up synchronously: the object is removed after the message is completed
    # (the order itself: tests/integration/claimcheck/test_settlement_order.py, tests/e2e/test_telemetry.py).
    wait_until(
        lambda: (
            {
                view["payload_state"]
                for view in wait_for_states(stack, [large["work_item_id"], pdf["work_item_id"]]).values()
            }
            == {"removed"}
        ),
        "the by-reference objects were not removed once their messages were completed",
    )


def test_invalid_message_is_dead_lettered_with_its_reason(stack: LocalStack, bus: ServiceBusClient) -> None:
    """A message that is not an envelope lands in the DLQ at once with reason invalid_envelope."""
    message_id = f"bad-{uuid.uuid4().hex}"
    with bus.get_queue_sender("documents") as sender:
        sender.send_messages(ServiceBusMessage(b"{not json", message_id=message_id, session_id=message_id))
    found = _wait_for_dead_letters(bus, lambda message: message.message_id == message_id)
    assert [(message.dead_letter_reason, message.delivery_count) for message in found] == [
        ("invalid_envelope", 0)
    ]


def test_older_version_queued_with_a_newer_is_superseded(stack: LocalStack, bus: ServiceBusClient) -> None:
    """Both versions of a work item queue up in its session; the older is settled as superseded, never over
    the newer, and only the newer produces a result (the order itself: test_stalled_producer.py)."""
    tenant = _tenant()
    work_item_id = f"wi-{uuid.uuid4().hex}"
    with bus.get_queue_receiver("documents", session_id=work_item_id) as hold:
        hold.peek_messages(max_message_count=1)  # holding the session keeps the consumer away from it
        for current, sample in enumerate(("service-agreement.txt", "contrato-prestacao-servicos.txt")):
            document = (SAMPLES / sample).read_bytes()
            submit(stack, document, tenant=tenant, work_item_id=work_item_id, if_match=current or None)
    views = wait_for_states(stack, [work_item_id])
    assert (views[work_item_id]["version"], views[work_item_id]["result"]["version"]) == (2, 2)
    assert [
        event.version for event in result_events(bus, [work_item_id]) if event.subscription == "audit"
    ] == [2]
    superseded = _wait_for_dead_letters(bus, lambda message: message.session_id == work_item_id)
    assert [message.dead_letter_reason for message in superseded] == ["version_mismatch"]
    # Read-after-write for whoever wrote version 1: a newer version with other content replaced it.
    status_url = f"{stack.api_url}/work-items/{work_item_id}"
    older = requests.get(status_url, params={"min_version": "1"}, headers=auth(stack), timeout=30).json()
    assert (older["visibility"], older["next_action"]) == ("conflict_detected", "re_read")


# Sending and completing the burst share one budget, kept well under pytest's 300 s timeout: on a
# machine too loaded to finish, the test fails saying how far it got instead of being killed mid-wait.
BURST_BUDGET_SECONDS = 200.0


def test_burst_of_200_documents_across_20_tenants(stack: LocalStack, bus: ServiceBusClient) -> None:
    """200 documents from 20 tenants all complete, each with exactly one result event."""
    documents = [(SAMPLES / name).read_bytes() for name in ("service-agreement.txt", "urgent-notice.txt")]
    tenants = [_tenant() for _ in range(20)]
    deadline = time.monotonic() + BURST_BUDGET_SECONDS

    def send(index: int) -> str:
        assert time.monotonic() < deadline, f"the burst was not even sent within {BURST_BUDGET_SECONDS:.0f} s"
        receipt = submit(stack, documents[index % 2], tenant=tenants[index % 20])
        return str(receipt["work_item_id"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        work_item_ids = list(pool.map(send, range(200)))
    assert len(set(work_item_ids)) == 200
    wait_for_states(stack, work_item_ids, timeout=max(1.0, deadline - time.monotonic()))
    audit = [
        event.work_item_id for event in result_events(bus, work_item_ids) if event.subscription == "audit"
    ]
    assert sorted(audit) == sorted(work_item_ids)


def _wait_for_dead_letters(
    bus: ServiceBusClient, wanted: Callable[[ServiceBusReceivedMessage], bool]
) -> list[ServiceBusReceivedMessage]:
    found: list[ServiceBusReceivedMessage] = []

    def arrived() -> bool:
        found[:] = [message for message in dead_letters(bus) if wanted(message)]
        return bool(found)

    wait_until(arrived, "no matching dead letter")
    return found
