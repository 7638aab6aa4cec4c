"""Pure rules for riding out crashes and outages: how long to wait for another attempt's claim, which
failures mean "a dependency is unreachable" rather than "this message is bad", a circuit breaker for
publishing, and a failure streak that logs state changes instead of every attempt.

No I/O here: the consumer, the Service Bus adapter and the local host's receivers call these.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from claimcheck.outcome import compute_backoff

# Exception class names (anywhere in the MRO) that mean "could not reach the service", from the
# Azure SDKs and the standard library. Matched by name so this module imports no SDK.
_OUTAGE_NAMES = frozenset(
    {
        "StorageUnavailable",  # claimcheck.errors: the storage adapters' wrapping of the two below
        "ServiceRequestError",  # azure-core: the request never got an answer (refused, DNS, reset)
        "ServiceResponseError",  # azure-core: the connection broke while reading the answer
        "BrokerUnavailable",  # claimcheck.errors: the Service Bus adapters' wrapping of the three below
        "ServiceBusConnectionError",
        "ServiceBusCommunicationError",
        "OperationTimeoutError",
        "ConnectionError",
        "TimeoutError",
    }
)

# While another attempt's claim is being waited out, look again at least this often, so that a holder
# that completes is noticed soon (its record then replays as AlreadyDone).
CLAIM_POLL = timedelta(seconds=2)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and its causes (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _unreachable(error: BaseException) -> bool:
    return any(cls.__name__ in _OUTAGE_NAMES for cls in type(error).__mro__)


def is_outage(error: BaseException) -> bool:
    """True when ``error`` (or its cause) says a service was unreachable, not that the input was bad."""
    return any(_unreachable(each) for each in _chain(error))


# HTTP statuses with which a service that did answer says "not now" rather than "never": its own
# failure (5xx), a timeout (408) or throttling (429). Intake answers them as an outage (503).
_NOT_NOW_STATUSES = frozenset({408, 429})
# The adapters' wrapping of an SDK error that did get an answer (claimcheck.errors).
_ANSWERED_NAMES = frozenset({"StorageFailed", "BrokerFailed"})


def is_unavailable(error: BaseException) -> bool:
    """True for an outage (``is_outage``) or a service that answered with a server error, a timeout or
    throttling (its SDK exception's ``status_code``): the request may succeed as sent later."""
    return any(_unreachable(each) or _answered_not_now(each) for each in _chain(error))


def _answered_not_now(error: BaseException) -> bool:
    if type(error).__name__ not in _ANSWERED_NAMES:
        return False
    status = getattr(error.__cause__, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status in _NOT_NOW_STATUSES)


def claim_wait_delay(
    now: datetime,
    holder_expires_at: datetime | None,
    *,
    waited: timedelta,
    budget: timedelta,
    poll: timedelta = CLAIM_POLL,
) -> timedelta | None:
    """How long to sleep before asking for a held claim again; None once ``budget`` is spent.

    Waits until the holder's lease ends (a crashed holder's claim is then taken over), but at most
    ``poll`` at a time (a live holder that completes is seen sooner) and never past the budget.
    """
    remaining_budget = budget - waited
    if remaining_budget <= timedelta(0):
        return None
    until_expiry = (holder_expires_at - now) if holder_expires_at is not None else poll
    # A lease that just ended: ask again almost at once (someone else may be taking it over).
    delay = max(until_expiry, timedelta(milliseconds=50))
    return min(delay, poll, remaining_budget)


class FailureStreak:
    """Counts consecutive failures of one thing and logs only its state changes.

    The first failure logs "down", the first success after failures logs "back up" with how many
    failures there were; everything in between is silent. ``delay()`` is the backoff before the next
    try (exponential with jitter, capped), from the one ``compute_backoff``.
    """

    def __init__(
        self,
        what: str,
        logger: logging.Logger,
        *,
        base: timedelta = timedelta(milliseconds=500),
        cap: timedelta = timedelta(seconds=30),
    ) -> None:
        self.what = what
        self.failures = 0
        self._log = logger
        self._base = base
        self._cap = cap
        self._lock = threading.Lock()  # one streak may be shared by several worker threads

    def failed(self, error: BaseException) -> timedelta:
        """Record a failure; answer how long to wait before the next try."""
        with self._lock:
            self.failures += 1
            failures = self.failures
        if failures == 1:
            self._log.warning("%s is down (%s); retrying with backoff", self.what, type(error).__name__)
        return compute_backoff(failures, base=self._base, max_backoff=self._cap)

    def succeeded(self) -> None:
        with self._lock:
            failures, self.failures = self.failures, 0
        if failures:
            self._log.warning("%s is back up after %d failed attempt(s)", self.what, failures)


class CircuitOpen(ConnectionError):
    """The circuit breaker is open: the service failed recently, so this call was not even tried."""

    def __init__(self, what: str, retry_after: float) -> None:
        super().__init__(f"{what} is unavailable; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


class CircuitBreaker:
    """Closed → (``threshold`` consecutive failures) → open for ``cool_down`` → half-open: one trial
    call goes through; its success closes the circuit, its failure opens it again.

    While open, ``before_call`` raises ``CircuitOpen`` at once, so callers answer in milliseconds
    instead of each waiting out its own timeout against a service known to be down. Thread-safe.
    """

    def __init__(
        self,
        what: str,
        logger: logging.Logger,
        *,
        threshold: int = 1,
        cool_down: timedelta = timedelta(seconds=5),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._streak = FailureStreak(what, logger)
        self._threshold = threshold
        self._cool_down = cool_down.total_seconds()
        self._monotonic = monotonic
        self._opened_at: float | None = None
        self._trial_running = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None

    def is_open_now(self) -> bool:
        """True while open and cooling down: a caller should refuse at once, without trying."""
        with self._lock:
            if self._opened_at is None:
                return False
            return self._monotonic() - self._opened_at < self._cool_down or self._trial_running

    def before_call(self) -> None:
        """Raise ``CircuitOpen`` unless this call may go through (closed, or the one half-open trial)."""
        with self._lock:
            if self._opened_at is None:
                return
            waited = self._monotonic() - self._opened_at
            if waited >= self._cool_down and not self._trial_running:
                self._trial_running = True  # half-open: this caller tries; the others keep failing fast
                return
            raise CircuitOpen(self._streak.what, max(1.0, self._cool_down - waited))

    def succeeded(self) -> None:
        with self._lock:
            self._opened_at = None
            self._trial_running = False
            self._streak.succeeded()

    def failed(self, error: BaseException) -> None:
        with self._lock:
            self._streak.failed(error)
            self._trial_running = False
            if self._streak.failures >= self._threshold:
                self._opened_at = self._monotonic()

    def retry_after(self) -> float:
        """Seconds until the next trial call, for a Retry-After header (at least 1)."""
        with self._lock:
            if self._opened_at is None:
                return 1.0
            return max(1.0, self._cool_down - (self._monotonic() - self._opened_at))
