"""End to end: a component crashes while documents are being processed and comes back at once; every
document completes exactly once, nothing is dead-lettered, nobody intervenes (issue 10).

The host and the emulator are SIGKILLed and restarted. Azurite is frozen (SIGSTOP) for several seconds
instead: it acknowledges writes before persisting them (LokiJS autosave every 5 s), so a SIGKILLed
Azurite forgets acknowledged writes, which real Azure Storage never does; a frozen one is the outage our
code must ride out (requests hang, then fail or complete) without an emulator artefact.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable

from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient
from claimcheck.idempotency import IN_PROGRESS, result_effect_key

from local.stack import LocalStack

from .journey import SAMPLES, dead_letters, result_events, submit, wait_for_states

DOCUMENTS = 6
PURPOSE = "contract-review"


def _submit_batch(stack: LocalStack) -> list[str]:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    # ~0.9 MB each (under the e2e stack's 1 MiB limit), so that processing takes long enough to be hit.
    document = (SAMPLES / "master-agreement-large.txt").read_bytes() * 20
    return [
        submit(stack, document + f"\n{index}\n".encode(), tenant=tenant, purpose=PURPOSE)["work_item_id"]
        for index in range(DOCUMENTS)
    ]


def _wait_for_a_claim(stack: LocalStack, work_item_ids: list[str], timeout: float = 120.0) -> None:
    """Wait until at least one of these documents is mid-processing (its effect claimed, not done)."""
    keys = {result_effect_key(work_item_id, 1, PURPOSE) for work_item_id in work_item_ids}
    table = TableClient.from_connection_string(stack.storage_connection_string, "idempotency")
    deadline = time.monotonic() + timeout
    with table:
        while time.monotonic() < deadline:
            claims = table.query_entities(f"status eq '{IN_PROGRESS}'", select=["PartitionKey"])
            if any(claim["PartitionKey"] in keys for claim in claims):
                return
            time.sleep(0.05)
    raise AssertionError(f"no document was mid-processing within {timeout:.0f} s")


def _assert_each_completed_exactly_once(stack: LocalStack, work_item_ids: list[str]) -> None:
    wait_for_states(stack, work_item_ids, timeout=240)
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus:
        audit = [event for event in result_events(bus, work_item_ids) if event.subscription == "audit"]
        dead = [
            message.session_id for message in dead_letters(bus) if message.session_id in set(work_item_ids)
        ]
    assert dead == []
    # One effect each: one result event id per document. (The test topology turns duplicate detection
    # off on the results topic, so a publish repeated after a lost acknowledgement would show twice as
    # the same id; Azure drops it.)
    ids_per_item = {work_item_id: set[str]() for work_item_id in work_item_ids}
    for event in audit:
        ids_per_item[event.work_item_id].add(event.message_id)
    assert {work_item_id: len(ids) for work_item_id, ids in ids_per_item.items()} == dict.fromkeys(
        work_item_ids, 1
    )


def _crash_mid_processing(stack: LocalStack, crash: Callable[[], None]) -> None:
    work_item_ids = _submit_batch(stack)
    _wait_for_a_claim(stack, work_item_ids)
    crash()
    _assert_each_completed_exactly_once(stack, work_item_ids)


def test_host_killed_mid_processing_and_restarted_at_once(stack: LocalStack) -> None:
    """The restarted host finds the dead attempts' claims and waits out their leases (seconds) instead
    of spending its five deliveries in backoff against them."""

    def crash() -> None:
        stack.kill("host")
        stack.start("host")

    _crash_mid_processing(stack, crash)


def test_emulator_killed_mid_processing_and_restarted_at_once(stack: LocalStack) -> None:
    def crash() -> None:
        stack.kill("emulator")
        stack.start("emulator")

    _crash_mid_processing(stack, crash)


def test_storage_outage_mid_processing(stack: LocalStack) -> None:
    def crash() -> None:
        os.killpg(stack.azurite.process.pid, signal.SIGSTOP)
        try:
            time.sleep(8)
        finally:
            os.killpg(stack.azurite.process.pid, signal.SIGCONT)

    _crash_mid_processing(stack, crash)
