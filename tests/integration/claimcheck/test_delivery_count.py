"""The app's own delivery count on Azurite, for triggers that do not report the broker's (Azure's)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from claimcheck import DeadLetter, Retry
from claimcheck.adapters.tables import AzureEntityTable
from claimcheck.deliveries import DeliveryCounter
from claimcheck.outcome import DeadLetterReason
from claimcheck.testing import consume_and_settle

from tests.integration.claimcheck.conftest import Harness, document
from tests.integration.claimcheck.test_consumer import submit

Build = Callable[..., Harness]
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _counter(harness: Harness) -> DeliveryCounter:
    table = harness.tables.create_table_if_not_exists(harness.settings.idempotency_table)
    return DeliveryCounter(AzureEntityTable(table))


def test_each_delivery_counts_once_per_message(make_harness: Build) -> None:
    counter = _counter(make_harness())
    assert counter.count("m-1", 7, "lock-a", now=NOW) == 1
    assert counter.count("m-1", 7, "lock-a", now=NOW) == 1  # the same delivery again: not counted twice
    assert counter.count("m-1", 7, "lock-b", now=NOW) == 2
    assert counter.count("m-1", 8, "lock-c", now=NOW) == 1  # a replayed copy starts again
    assert counter.count("m-2", 9, "lock-d", now=NOW) == 1


def test_racing_consumers_neither_lose_nor_share_a_count(make_harness: Build) -> None:
    counter = _counter(make_harness())
    with ThreadPoolExecutor(max_workers=4) as pool:
        numbers = list(pool.map(lambda n: counter.count("m-1", 7, f"lock-{n}", now=NOW), range(8)))
    assert sorted(numbers) == list(range(1, 9))


def test_consumer_gives_up_on_the_last_delivery_by_its_own_count(make_harness: Build) -> None:
    """A trigger without the broker's count (Azure's binding): the last-delivery reason still fires."""
    harness = make_harness(outage_wait_seconds=0)
    submit(harness, document(50_000))
    harness.bus.fail_next = 10**6  # the result publish keeps failing: every delivery answers Retry
    delays = []
    for _ in range(harness.settings.max_delivery_count - 1):
        delivery = replace(
            harness.delivery(), delivery_count=None, sequence_number=7, lock_token=str(uuid.uuid4())
        )
        outcome = consume_and_settle(harness.claimcheck.consumer, delivery)
        assert isinstance(outcome, Retry)
        delays.append(outcome.delay)
    again = consume_and_settle(
        harness.claimcheck.consumer, delivery
    )  # the same delivery decided twice counts once
    assert isinstance(again, Retry)
    last = replace(delivery, lock_token=str(uuid.uuid4()))
    outcome = consume_and_settle(harness.claimcheck.consumer, last)
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.PROCESSING_FAILED
    assert f"gave up after {harness.settings.max_delivery_count} deliveries" in outcome.description
    assert delays[-1] > delays[0]  # the backoff grew with the count


def test_the_brokers_count_costs_no_row(make_harness: Build) -> None:
    harness = make_harness(outage_wait_seconds=0)
    submit(harness, document(50_000))
    harness.bus.fail_next = 10**6
    assert isinstance(consume_and_settle(harness.claimcheck.consumer, harness.delivery(count=1)), Retry)
    assert [
        row for row in harness.rows(harness.settings.idempotency_table) if row["RowKey"] == "deliveries"
    ] == []
