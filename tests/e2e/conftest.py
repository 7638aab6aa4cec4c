"""The whole local stack for end-to-end tests: Azurite, the emulator and the Functions host running
functions/function_app.py, all as child processes, with a test topology of short locks."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient
from claimcheck.adapters.servicebus import ServiceBusBus
from claimcheck.messages import OutboundMessage
from claimcheck.settings import SETTING_NAMES

from infra.topology import load_topology
from local.stack import LocalStack, start_stack

from .log_scan import SESSION_NEEDLES, banners_of, leaks, stack_logs

# Short locks so that a crashed consumer's message comes back in seconds, and no duplicate detection
# on the results topic so that counting result events there measures the consumer's own idempotency.
TEST_TOPOLOGY = {
    "queues": [{"name": "documents", "lockDuration": "PT5S"}],
    "topics": [{"name": "results", "requiresDuplicateDetection": False}],
}

# Small enough that the 413 test sends little, large enough for every sample.
MAX_PAYLOAD_BYTES = 1024 * 1024
# POST /documents' inline cap (the host's body limit is derived from it): above MAX_PAYLOAD_BYTES, so that an
# oversized document sent inline still meets the policy's payload_too_large, and small to send.
MAX_INLINE_REQUEST_BYTES = 2 * MAX_PAYLOAD_BYTES
CLAIM_LEASE_SECONDS = 9
# A short visibility deadline, so that propagation_exceeded is reached in seconds (test_read_after_write).
VISIBILITY_WINDOW_SECONDS = 8


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One running local stack for the e2e session (tests isolate by tenant and work item id)."""
    with start_stack(
        work_dir=tmp_path_factory.mktemp("stack"),
        topology=load_topology(TEST_TOPOLOGY),
        app_settings={
            SETTING_NAMES["max_payload_bytes"]: str(MAX_PAYLOAD_BYTES),
            SETTING_NAMES["max_inline_request_bytes"]: str(MAX_INLINE_REQUEST_BYTES),
            # A crashed attempt's claim ends within this; the live one renews it every third of it.
            SETTING_NAMES["claim_lease_seconds"]: str(CLAIM_LEASE_SECONDS),
            SETTING_NAMES["visibility_window_seconds"]: str(VISIBILITY_WINDOW_SECONDS),
        },
    ) as running:
        banners = banners_of(running)
        yield running
    # Log hygiene over the whole session, whatever the test order: every log, now that the stack has
    # stopped, against the secret shapes and the markers tests registered. A leak fails the run.
    work_dir = running.work_dir
    assert leaks(stack_logs(work_dir, banners), work_dir, SESSION_NEEDLES) == []


@pytest.fixture
def bus(stack: LocalStack) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client:
        yield client


# How long a held publish may wait for the test to release it.
HOLD_LIMIT_SECONDS = 180.0


class HeldBroker:
    """A producer's ``Bus`` whose publish waits until released, then publishes: a slow broker."""

    def __init__(self, bus: ServiceBusBus) -> None:
        self._bus = bus
        self.entered = threading.Event()
        self.release = threading.Event()

    def publish(self, destination: str, message: OutboundMessage) -> None:
        self.entered.set()
        if not self.release.wait(HOLD_LIMIT_SECONDS):
            raise TimeoutError("the test never released the held publish")
        self._bus.publish(destination, message)


@pytest.fixture
def held_broker(stack: LocalStack) -> Iterator[HeldBroker]:
    bus = ServiceBusBus(connection_string=stack.servicebus_connection_string)
    held = HeldBroker(bus)
    try:
        yield held
    finally:
        held.release.set()
        bus.close()
