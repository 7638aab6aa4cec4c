"""End to end with a producer stalled between publishing its envelope and activating the payload: the
consumer retries, then dead-letters payload_missing; the operator replays it with `claimcheck-ops` once
the producer finished; and while it retries, the next message of its session waits behind it."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from azure.servicebus import ServiceBusClient
from claimcheck import ClaimCheck
from claimcheck.adapters.servicebus import ServiceBusBus
from claimcheck.messages import OutboundMessage
from claimcheck.producer import Producer
from claimcheck.settings import Settings
from typer.testing import CliRunner

from local.stack import LocalStack
from scripts.ops import app as ops_app

from .journey import SAMPLES, auth, dead_letters, result_events, submit, wait_for_states

# The consumer gives up on a version that stays invisible after five deliveries with backoff (about
# 20-30 s on an idle machine); the rest is headroom for a loaded one.
DEAD_LETTER_TIMEOUT_SECONDS = 150.0
PRODUCER_STALL_LIMIT_SECONDS = DEAD_LETTER_TIMEOUT_SECONDS + 60.0


class _PublishThenStall:
    """A producer's bus that confirms the publish and then holds the producer there, before it activates
    the registry record: a producer instance paused (GC, slow storage, a debugger) right after sending."""

    def __init__(self, bus: ServiceBusBus) -> None:
        self._bus = bus
        self.published = threading.Event()
        self.resume = threading.Event()

    def publish(self, destination: str, message: OutboundMessage) -> None:
        self._bus.publish(destination, message)
        self.published.set()
        if not self.resume.wait(PRODUCER_STALL_LIMIT_SECONDS):
            raise TimeoutError("the test never let the stalled producer finish")


@pytest.fixture
def stalling_bus(stack: LocalStack) -> Iterator[_PublishThenStall]:
    bus = ServiceBusBus(connection_string=stack.servicebus_connection_string)
    stalling = _PublishThenStall(bus)
    try:
        yield stalling
    finally:
        bus.close()


def _ops(stack: LocalStack, *args: str) -> tuple[int, Any]:
    """Run `claimcheck-ops <args> --json` against the stack's emulator; exit code and parsed stdout."""
    result = CliRunner().invoke(
        ops_app, [*args, "--json", "--connection-string", stack.servicebus_connection_string]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def _wait_for_dead_letter_of(stack: LocalStack, session_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEAD_LETTER_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        code, listed = _ops(stack, "dlq", "list", "documents", "--max", "5000")
        assert code == 0, listed
        found = [entry for entry in listed if entry["session_id"] == session_id]
        if found:
            assert len(found) == 1, found
            return dict(found[0])
        time.sleep(1.0)
    raise AssertionError(f"no dead letter for {session_id} within {DEAD_LETTER_TIMEOUT_SECONDS:.0f} s")


def _audit_events(bus: ServiceBusClient, work_item_id: str) -> list[int]:
    return [event.version for event in result_events(bus, [work_item_id]) if event.subscription == "audit"]


def _stalling_producer(stack: LocalStack, bus: _PublishThenStall) -> Producer:
    return ClaimCheck.from_settings(
        Settings(environment="local"), storage_connection=stack.storage_connection_string, bus=bus
    ).producer


def test_dead_lettered_message_is_replayed_once_after_its_cause_is_fixed(
    stack: LocalStack, bus: ServiceBusClient, stalling_bus: _PublishThenStall
) -> None:
    """An envelope published before its producer activated the payload is dead-lettered payload_missing;
    once the producer finishes, one replay yields exactly one result and a second replay finds nothing."""
    producer = _stalling_producer(stack, stalling_bus)
    work_item_id = f"wi-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(max_workers=1) as pool:
        intake = pool.submit(
            producer.submit,
            (SAMPLES / "service-agreement.txt").read_bytes(),
            tenant_id=f"t-{uuid.uuid4().hex[:12]}",
            purpose="contract-review",
            classification="confidential",  # sensitive: always by reference, through the registry
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        try:
            assert stalling_bus.published.wait(60), "the producer never published its envelope"
            dead_letter = _wait_for_dead_letter_of(stack, work_item_id)
            assert dead_letter["dead_letter_reason"] == "payload_missing"
            assert "not confirmed" in dead_letter["dead_letter_description"]
            assert _audit_events(bus, work_item_id) == []
        finally:
            stalling_bus.resume.set()  # the fix: the producer finishes, activating the record
        receipt = intake.result(timeout=60)
    assert (receipt.transport, receipt.version) == ("reference", 1)

    sequence_number = str(dead_letter["sequence_number"])
    code, replayed = _ops(stack, "dlq", "replay", "documents", sequence_number)
    assert (code, [entry["status"] for entry in replayed]) == (0, ["replayed"])
    view = wait_for_states(stack, [work_item_id])[work_item_id]
    assert (view["version"], view["result"]["version"]) == (1, 1)
    assert _audit_events(bus, work_item_id) == [1]

    code, again = _ops(stack, "dlq", "replay", "documents", sequence_number)
    assert (code, [entry["status"] for entry in again]) == (1, ["not_found"])
    assert _audit_events(bus, work_item_id) == [1]


def test_next_message_of_a_session_waits_while_the_first_is_retried(
    stack: LocalStack, bus: ServiceBusClient, stalling_bus: _PublishThenStall
) -> None:
    """Version 2 of a work item, ready to process, is not touched while version 1 ahead of it in the same
    session is being retried; it completes only after version 1 is dead-lettered."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    work_item_id = f"wi-{uuid.uuid4().hex}"
    document = (SAMPLES / "service-agreement.txt").read_bytes()
    with ThreadPoolExecutor(max_workers=1) as pool:
        stalled = pool.submit(
            _stalling_producer(stack, stalling_bus).submit,
            document,
            tenant_id=tenant,
            purpose="contract-review",
            classification="confidential",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        try:
            assert stalling_bus.published.wait(60), "the producer never published version 1"
            # Version 2 is confirmed at once: processable, but queued behind version 1 in the session.
            assert (
                submit(stack, document, tenant=tenant, work_item_id=work_item_id)["receipt"]["version"] == 2
            )
            waited = _observe_until_dead_lettered(stack, bus, work_item_id)
        finally:
            stalling_bus.resume.set()
        stalled.result(timeout=60)  # the late producer confirms nothing: version 2 is already visible
    assert waited > 0, "version 1 was dead-lettered before version 2 could be seen waiting"
    view = wait_for_states(stack, [work_item_id])[work_item_id]
    assert (view["version"], view["result"]["version"]) == (2, 2)
    assert _audit_events(bus, work_item_id) == [2]


def _observe_until_dead_lettered(stack: LocalStack, bus: ServiceBusClient, session_id: str) -> int:
    """Until the session's first message is dead-lettered, the work item must not reach version 2's
    completion; answers how many times it was seen waiting. The state is read before the DLQ, so a
    completion seen here happened while the first message was still unsettled."""
    deadline = time.monotonic() + DEAD_LETTER_TIMEOUT_SECONDS
    waited = 0
    while time.monotonic() < deadline:
        response = requests.get(f"{stack.api_url}/work-items/{session_id}", headers=auth(stack), timeout=30)
        state = response.json()["state"]
        if any(message.session_id == session_id for message in dead_letters(bus)):
            return waited
        assert state != "completed", "version 2 completed while version 1 ahead of it was still retried"
        waited += 1
        time.sleep(1.0)
    raise AssertionError(f"version 1 was not dead-lettered within {DEAD_LETTER_TIMEOUT_SECONDS:.0f} s")
