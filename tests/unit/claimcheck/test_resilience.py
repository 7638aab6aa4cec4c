"""Pure rules for crashes and outages: claim waits, outage classification, failure streaks, breaker."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from claimcheck.resilience import (
    CircuitBreaker,
    CircuitOpen,
    FailureStreak,
    claim_wait_delay,
    is_outage,
    is_unavailable,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
log = logging.getLogger("test.resilience")


class ServiceRequestError(Exception):
    """Named like azure-core's: the classification goes by class name, so no SDK import is needed."""


def test_unreachable_services_are_outages_and_bad_input_is_not() -> None:
    assert is_outage(ConnectionRefusedError())
    assert is_outage(TimeoutError())
    assert is_outage(ServiceRequestError())
    assert not is_outage(ValueError("bad"))
    assert not is_outage(KeyError("x"))


def test_an_outage_wrapped_in_another_error_is_still_an_outage() -> None:
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = ConnectionResetError()
    assert is_outage(wrapped)


def test_claim_wait_sleeps_until_the_lease_ends_polling_at_most_every_two_seconds() -> None:
    budget = timedelta(seconds=120)
    far = claim_wait_delay(NOW, NOW + timedelta(seconds=25), waited=timedelta(0), budget=budget)
    near = claim_wait_delay(NOW, NOW + timedelta(milliseconds=700), waited=timedelta(0), budget=budget)
    assert far == timedelta(seconds=2)
    assert near == timedelta(milliseconds=700)


def test_claim_wait_asks_again_at_once_for_a_lease_that_just_ended() -> None:
    budget = timedelta(seconds=9)
    delay = claim_wait_delay(NOW, NOW - timedelta(seconds=1), waited=timedelta(0), budget=budget)
    assert delay == timedelta(milliseconds=50)


def test_claim_wait_stops_at_its_budget() -> None:
    budget = timedelta(seconds=10)
    last = claim_wait_delay(NOW, NOW + timedelta(seconds=30), waited=timedelta(seconds=9.5), budget=budget)
    assert last == timedelta(seconds=0.5)
    assert claim_wait_delay(NOW, NOW + timedelta(seconds=30), waited=budget, budget=budget) is None


def test_a_failure_streak_logs_down_once_and_back_up_once_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    streak = FailureStreak("the broker", log, base=timedelta(seconds=1), cap=timedelta(seconds=8))
    with caplog.at_level(logging.INFO, logger=log.name):
        delays = [streak.failed(ConnectionRefusedError()) for _ in range(6)]
        streak.succeeded()
        streak.succeeded()
    assert [record.getMessage() for record in caplog.records] == [
        "the broker is down (ConnectionRefusedError); retrying with backoff",
        "the broker is back up after 6 failed attempt(s)",
    ]
    # Exponential with equal jitter: each delay within [d/2, d] of 1, 2, 4, 8, 8, 8 seconds.
    for delay, ceiling in zip(delays, (1, 2, 4, 8, 8, 8), strict=True):
        assert ceiling / 2 <= delay.total_seconds() <= ceiling


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_fails_fast_while_open_then_lets_one_trial_through() -> None:
    clock = FakeTime()
    breaker = CircuitBreaker("the broker", log, cool_down=timedelta(seconds=5), monotonic=clock)
    breaker.before_call()  # closed
    breaker.failed(ConnectionRefusedError())
    with pytest.raises(CircuitOpen) as refused:
        breaker.before_call()
    assert refused.value.retry_after == pytest.approx(5)
    clock.now += 5
    breaker.before_call()  # the half-open trial goes through ...
    with pytest.raises(CircuitOpen):
        breaker.before_call()  # ... and only that one
    breaker.failed(ConnectionRefusedError())  # the trial failed: open for another cool-down
    clock.now += 1
    with pytest.raises(CircuitOpen):
        breaker.before_call()
    clock.now += 4
    breaker.before_call()
    breaker.succeeded()
    assert not breaker.is_open
    breaker.before_call()
    breaker.before_call()  # closed again: everyone goes through


def test_breaker_opens_only_after_its_threshold() -> None:
    breaker = CircuitBreaker("the broker", log, threshold=3, monotonic=FakeTime())
    for _ in range(2):
        breaker.failed(TimeoutError())
        breaker.before_call()
    breaker.failed(TimeoutError())
    assert breaker.is_open
    assert isinstance(CircuitOpen("x", 2.0), ConnectionError)  # callers treat it as an outage


class _Answered:
    """What azure-core's HttpResponseError reads from a transport response."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.reason = "reason"
        self.headers: dict[str, str] = {}
        self.request = None

    def text(self, encoding: str | None = None) -> str:
        return ""


def _storage_answered(status: int) -> BaseException:
    """The adapters' error for a storage answer ``status`` (adapters/sdk_errors.py, the real SDK type)."""
    from azure.core.exceptions import HttpResponseError
    from claimcheck.adapters.sdk_errors import storage_errors
    from claimcheck.errors import ClaimCheckError

    with pytest.raises(ClaimCheckError) as raised, storage_errors("table insert"):
        raise HttpResponseError(
            message="https://account.example/table?sig=secret", response=_Answered(status)
        )
    return raised.value


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_storage_answering_a_server_error_timeout_or_throttling_is_unavailable(status: int) -> None:
    error = _storage_answered(status)
    assert type(error).__name__ == "StorageFailed"
    assert is_unavailable(error)
    assert not is_outage(error)  # the consumer's own classification is unchanged


@pytest.mark.parametrize("status", [400, 403, 404, 409, 412])
def test_storage_refusing_the_request_itself_is_not_unavailable(status: int) -> None:
    assert not is_unavailable(_storage_answered(status))


def test_unreachable_storage_is_unavailable_and_bad_input_is_not() -> None:
    from claimcheck.errors import StorageUnavailable

    assert is_unavailable(StorageUnavailable("upload: storage did not answer (ServiceRequestError)"))
    assert is_unavailable(ConnectionRefusedError())
    assert not is_unavailable(ValueError("bad"))
