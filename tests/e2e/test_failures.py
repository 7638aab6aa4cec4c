"""End to end under failure: the host killed mid-processing, the emulator restarted mid-run."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import SessionCannotBeLockedError

from local.stack import LocalStack

from .journey import SAMPLES, result_events, submit, wait_for_states


@contextmanager
def _frozen_storage(stack: LocalStack) -> Iterator[None]:
    """Freeze Azurite (SIGSTOP) so that a consumer touching storage blocks mid-processing."""
    os.killpg(stack.azurite.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(stack.azurite.process.pid, signal.SIGCONT)


def _session_is_held_by_someone_else(bus: ServiceBusClient, session_id: str) -> bool:
    """Try to accept the session; if that works after all, hand its messages straight back."""
    try:
        with bus.get_queue_receiver("documents", session_id=session_id, max_wait_time=1) as receiver:
            for message in receiver.receive_messages(max_message_count=10, max_wait_time=1):
                receiver.abandon_message(message)
    except SessionCannotBeLockedError:
        return True
    return False


def test_host_killed_mid_processing_redelivers_and_yields_one_result(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    """A consumer killed while processing loses nothing: the message comes back and produces one result."""
    work_item_id = f"wi-{uuid.uuid4().hex}"
    document = (SAMPLES / "master-agreement-large.txt").read_bytes()
    with bus.get_queue_receiver("documents", session_id=work_item_id) as hold:
        hold.peek_messages(max_message_count=1)  # keep the consumer away until storage is frozen
        submit(stack, document, tenant=f"t-{uuid.uuid4().hex[:8]}", work_item_id=work_item_id)
        with _frozen_storage(stack):
            hold.close()  # the consumer takes the session now and blocks on storage
            time.sleep(1.5)  # its session workers poll every second; checking sooner would steal the session
            deadline = time.monotonic() + 30
            while not _session_is_held_by_someone_else(bus, work_item_id):
                assert time.monotonic() < deadline, "the consumer never took the session"
                time.sleep(0.2)
            stack.host.kill()
    stack.host.start()
    wait_for_states(stack, [work_item_id])
    audit = [event for event in result_events(bus, [work_item_id]) if event.subscription == "audit"]
    assert len(audit) == 1


def test_emulator_restart_mid_run_loses_nothing(stack: LocalStack, bus: ServiceBusClient) -> None:
    """Documents sent before and after an emulator restart all complete, each with exactly one result."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    document = (SAMPLES / "service-agreement.txt").read_bytes()
    before = [submit(stack, document, tenant=tenant)["work_item_id"] for _ in range(10)]
    stack.restart_emulator()
    after = [submit(stack, document, tenant=tenant)["work_item_id"] for _ in range(10)]
    wait_for_states(stack, before + after)
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as fresh:
        audit = [
            event.work_item_id
            for event in result_events(fresh, before + after)
            if event.subscription == "audit"
        ]
    assert sorted(audit) == sorted(before + after)
