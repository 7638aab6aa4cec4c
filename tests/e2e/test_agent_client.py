"""claimcheck.client against the local stack: one write per key, and bounded waiting that honours
Retry-After (the lagging write path is conftest's HeldBroker, a real Bus behind the producer's port)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from claimcheck import ClaimCheck
from claimcheck.client import ClaimCheckClient, Receipt
from claimcheck.settings import Settings

from local.stack import LocalStack

from .conftest import HeldBroker
from .journey import SAMPLES, TEST_IDENTITY

SAMPLE = SAMPLES / "service-agreement.txt"


def _client(stack: LocalStack, sleep: list[float] | None = None) -> ClaimCheckClient:
    return ClaimCheckClient(
        stack.api_url, lambda: stack.token(TEST_IDENTITY), sleep=time.sleep if sleep is None else sleep.append
    )


def test_submit_twice_with_one_key_writes_once_and_wait_ends_in_proceed(stack: LocalStack) -> None:
    client, key, tenant = _client(stack), uuid.uuid4().hex, f"t-agent-{uuid.uuid4().hex[:8]}"

    def submit() -> Receipt:
        return client.submit(
            SAMPLE,
            tenant_id=tenant,
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            idempotency_key=key,
        )

    first, again = submit(), submit()
    assert (again.work_item_id, again.version, again.replayed) == (first.work_item_id, first.version, True)
    assert not first.replayed
    final = client.wait(first, deadline_seconds=150)
    assert (final.visibility, final.next_action, final.exhausted) == ("version_confirmed", "proceed", False)
    assert final.body["result"]["version"] == first.version


def test_wait_is_bounded_and_honours_retry_after(stack: LocalStack, held_broker: HeldBroker) -> None:
    work_item_id, sleeps = f"wi-{uuid.uuid4().hex}", list[float]()
    producer = ClaimCheck.from_settings(
        Settings(environment="local"), storage_connection=stack.storage_connection_string, bus=held_broker
    ).producer
    with ThreadPoolExecutor(max_workers=1) as pool:
        intake = pool.submit(
            producer.submit,
            SAMPLE.read_bytes(),
            tenant_id=f"t-agent-{uuid.uuid4().hex[:8]}",
            purpose="contract-review",
            classification="internal",
            content_type="text/plain",
            work_item_id=work_item_id,
        )
        assert held_broker.entered.wait(60), "the producer never reached its publish"
        pending = Receipt(work_item_id=work_item_id, version=1, idempotency_key="-", replayed=False, raw={})
        final = _client(stack, sleeps).wait(pending, deadline_seconds=60, max_attempts=3)
        held_broker.release.set()
        intake.result(timeout=60)
    assert (final.visibility, final.next_action, final.exhausted, final.attempts) == (
        "awaiting_visibility",
        "wait",
        True,
        3,
    )
    # Full jitter from 0.5 s would sleep under a second; the API's Retry-After (>= 1 s) wins.
    assert len(sleeps) == 2
    assert all(delay >= 1 for delay in sleeps)
