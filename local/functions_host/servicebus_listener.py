"""Service Bus triggers: receive with the real (sync) azure-servicebus SDK and invoke the function.

Like the Service Bus extension of the Functions host:
- a session-enabled trigger runs up to ``maxConcurrentSessions`` sessions at once; each worker accepts
  the next available session, handles its messages one at a time in order, keeps the session lock
  renewed (AutoLockRenewer, up to ``maxAutoLockRenewalDuration``) and releases the session after
  ``sessionIdleTimeout`` without messages;
- any other trigger runs up to ``maxConcurrentCalls`` invocations at once, each message's lock renewed;
- the function gets what the real host and worker give it: the binding extension's decoding of the
  message's ``model_binding_data`` (no receiver attached) and, for a ServiceBusMessageActions
  parameter, the extension's own client, which settles over gRPC through our Settlement service
  (settlement.py) and so through the receiver that owns the message or session;
- with ``autoCompleteMessages`` on, the host completes the message when the function returns and
  abandons it when the function raises (unless the function settled it already); with it off, the
  host settles nothing: a message the function left unsettled stays locked until its lock (or its
  session's) is lost, as on Azure.

Each worker thread owns its own receiver, because a sync receiver must not be shared between threads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
)
from azure.servicebus.exceptions import MessageLockLostError, OperationTimeoutError, SessionLockLostError
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from claimcheck.outcome import compute_backoff
from claimcheck.resilience import FailureStreak

from local.functions_host.app_loader import ServiceBusFunction
from local.functions_host.binding_data import trigger_argument
from local.functions_host.host_config import ServiceBusOptions
from local.functions_host.invocation import invoke
from local.functions_host.phase_clock import PhaseClock
from local.functions_host.prompt_accept import prompt_accept
from local.functions_host.settlement import HeldMessage, settle, settlement_server

logger = logging.getLogger(__name__)

# How long one receive call may block: it bounds how quickly a worker notices a stop request.
_POLL_SECONDS = 1.0
# Backoff after a broker or connection error before a worker tries again (the emulator may be
# restarting): exponential with jitter from half a second, capped, as the Service Bus extension does.
_RETRY_BASE = timedelta(milliseconds=500)
_RETRY_CAP = timedelta(seconds=5)
# How long stop() waits for idle workers to notice the stop (a poll is _POLL_SECONDS).
_WORKER_EXIT_SECONDS = 3.0
# How long a session worker's accept waits at the broker for a session to become available. Each accept
# that finds none costs a new AMQP connection (the SDK opens one per session receiver: ~5 ms of host
# CPU and about as much of the broker's), so a one-second wait made an idle worker reconnect every
# second: maxConcurrentSessions workers per instance, ~13% of a core per idle instance and as much of
# the broker's, and during a burst the same for every worker without a session. Azure's host waits up
# to a minute. stop() calls a waiting accept off (prompt_accept), so it does not wait for it either.
_ACCEPT_WAIT_SECONDS = 5.0


class ConnectionSettingMissing(RuntimeError):
    """The binding's ``connection`` names an app setting that is not set."""


class ServiceBusListener:
    """Runs one Service Bus-triggered function until stopped."""

    def __init__(self, function: ServiceBusFunction, options: ServiceBusOptions) -> None:
        connection_string = os.environ.get(function.connection)
        if not connection_string:
            raise ConnectionSettingMissing(
                f"function {function.name}: app setting {function.connection!r} "
                "(the binding's connection) is not set"
            )
        self.function = function
        self.options = options
        self._settlements = settlement_server().registry
        auto_complete = function.auto_complete_messages
        self.auto_complete = options.auto_complete_messages if auto_complete is None else auto_complete
        # For a session trigger, "no session available within max_wait_time" is the normal idle answer.
        # The SDK would retry it with exponential backoff, sleeping seconds at a time and deaf to
        # stop(); with retries off our worker loop asks again at once (the broker's wait sets the
        # pace) and also owns recovery from any other failure (it reopens the receiver).
        retries = 0 if function.is_sessions_enabled else 3
        self._client = ServiceBusClient.from_connection_string(connection_string, retry_total=retries)
        self._renewer = self._lock_renewer()
        self._stopping = threading.Event()
        self.clock = PhaseClock()
        # Session receivers being closed in the background (see _release_in_background).
        self._releases: set[threading.Thread] = set()
        self._releases_changed = threading.Lock()
        # One streak for all of this function's workers: the broker being down is logged once, and its
        # return once (with the number of failed attempts), however many workers notice it.
        # Each worker backs off by its own consecutive failures (a shared count would grow with the
        # number of workers and keep them away long after the broker is back).
        self._broker = FailureStreak(f"function {function.name}: Service Bus ({function.entity})", logger)
        self._worker_failures = threading.local()
        # When the current outage was first noticed (monotonic), None while the broker answers. An answer
        # to a call that began before then says nothing about the broker now: with many workers, calls in
        # flight when the broker dies still return and would log "back up" between every two "down".
        self._down_since: float | None = None
        self._down_lock = threading.Lock()
        # Invocations under way; stop() waits for these only, not for workers blocked in a receive or
        # in the SDK's backoff while opening a session receiver (daemon threads, gone with the process).
        self._in_flight = 0
        self._in_flight_changed = threading.Condition()
        worker_count = (
            options.max_concurrent_sessions if function.is_sessions_enabled else options.max_concurrent_calls
        )
        work: Callable[[], None] = (
            self._session_worker if function.is_sessions_enabled else self._message_worker
        )
        self._threads = [
            threading.Thread(target=work, name=f"sb-{function.name}-{index}", daemon=True)
            for index in range(worker_count)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop receiving, let in-flight invocations finish and settle (bounded), then close the
        connections. A message received but not yet invoked is left unsettled: its lock expires and the
        broker redelivers it, as after any host shutdown."""
        self._stopping.set()
        with self._in_flight_changed:
            self._in_flight_changed.wait_for(lambda: self._in_flight == 0, timeout=timeout)
        # Idle workers notice the stop within one poll and close their own receivers; one waiting in a
        # session accept calls it off at its next turn (prompt_accept), within a read timeout.
        deadline = time.monotonic() + _WORKER_EXIT_SECONDS
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        # Then the sessions still being released (a worker that just stopped may have started one).
        with self._releases_changed:
            releasing = list(self._releases)
        for thread in releasing:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._renewer.close(wait=False)
        self._client.close()
        logger.info("function %s: workers' time: %s", self.function.name, self.clock.summary())

    def _lock_renewer(self) -> AutoLockRenewer:
        return AutoLockRenewer(
            max_lock_renewal_duration=self.options.max_auto_lock_renewal_duration.total_seconds()
        )

    def _receiver(self, *, session: bool) -> ServiceBusReceiver:
        function = self.function
        options: dict[str, object] = {
            "prefetch_count": self.options.prefetch_count,
            # For a session receiver: how long its accept waits at the broker (receive calls pass theirs).
            "max_wait_time": _ACCEPT_WAIT_SECONDS if session else _POLL_SECONDS,
        }
        if session:
            options["session_id"] = NEXT_AVAILABLE_SESSION
        if function.queue_name is not None:
            return self._client.get_queue_receiver(function.queue_name, **options)  # type: ignore[arg-type]
        return self._client.get_subscription_receiver(
            str(function.topic_name),
            str(function.subscription_name),
            **options,  # type: ignore[arg-type]
        )

    def _message_worker(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._receiver(session=False) as receiver:
                    while not self._stopping.is_set():
                        asked = time.monotonic()
                        messages = receiver.receive_messages(max_message_count=1, max_wait_time=_POLL_SECONDS)
                        self._broker_answered(asked)
                        for message in messages:
                            self._renewer.register(receiver, message)
                            self._handle(receiver, message)
            except Exception as error:  # a worker must outlive broker restarts
                self._pause_after(error)

    def _session_worker(self) -> None:
        while not self._stopping.is_set():
            asked = time.monotonic()
            try:
                receiver = self._receiver(session=True)
                # An accept that finds no session within the poll is timed apart: it is idle time.
                with (
                    self.clock.timing("accept", failed_as="no session within the poll"),
                    prompt_accept(cancel=self._stopping),
                ):
                    receiver.__enter__()
                try:
                    if not self._stopping.is_set():  # else released untouched: no message locked
                        self._drain_session(receiver)
                finally:
                    self._release_in_background(receiver)
            except OperationTimeoutError:
                self._broker_answered(asked)  # the broker answered: no session was available within the poll
                continue
            except Exception as error:  # a worker must outlive broker restarts
                self._pause_after(error)

    def _release_in_background(self, receiver: ServiceBusReceiver) -> None:
        """Close the session's receiver on a thread of its own, so the worker accepts the next session
        at once. Closing releases the session (and whatever the function left unsettled) within
        milliseconds, but then the SDK joins the receiver's keep-alive thread, which sleeps a second
        at a time: that join cost every session half a second of a worker's time on average."""

        def release() -> None:
            try:
                with self.clock.timing("release"):
                    receiver.close()
            except Exception as error:  # the broker went away: the session's lock lapses on its own
                logger.info("function %s: releasing a session failed: %s", self.function.name, error)
            finally:
                with self._releases_changed:
                    self._releases.discard(thread)

        thread = threading.Thread(target=release, name=f"sb-{self.function.name}-release", daemon=True)
        with self._releases_changed:
            self._releases.add(thread)
        thread.start()

    def _drain_session(self, receiver: ServiceBusReceiver) -> None:
        """Handle one session's messages in order until it stays idle for sessionIdleTimeout (or the
        function asks for its release)."""
        # The first receive opens the link, which is what accepts the next available session.
        asked = time.monotonic()
        with self.clock.timing("first receive"):
            messages = receiver.receive_messages(max_message_count=1, max_wait_time=_POLL_SECONDS)
        self._broker_answered(asked)
        # The listener's one renewer: it stops renewing the session by itself once the receiver closes
        # (a renewer per session cost two threads per session, i.e. per document).
        self._renewer.register(receiver, receiver.session)
        with self._settlements.holding_session(receiver) as session:
            idle_limit = self.options.session_idle_timeout.total_seconds()
            idle_since = time.monotonic()
            while True:
                for message in messages:
                    self._note_queue_wait(message)
                    with self.clock.timing("invoke"):
                        self._handle(receiver, message)
                    idle_since = time.monotonic()
                idle_left = idle_limit - (time.monotonic() - idle_since)
                if self._stopping.is_set() or session.release_requested.is_set() or idle_left <= 0:
                    return
                # Wait no longer than the idle time left: a short sessionIdleTimeout releases the session
                # (and frees this worker for the next one) when it says, not at the next poll.
                asked = time.monotonic()
                with self.clock.timing("wait for next message"):
                    messages = receiver.receive_messages(
                        max_message_count=1, max_wait_time=min(_POLL_SECONDS, idle_left)
                    )
                self._broker_answered(asked)

    def _note_queue_wait(self, message: ServiceBusReceivedMessage) -> None:
        """How long the message sat in the queue before a worker got it (broker and host share a clock
        locally; on one machine the figure is exact to the broker's millisecond)."""
        enqueued = message.enqueued_time_utc
        if enqueued is not None:
            waited = datetime.now(UTC) - enqueued.astimezone(UTC)
            self.clock.add("queued", max(0.0, waited.total_seconds()))

    def _handle(self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage) -> None:
        with self._in_flight_changed:
            if self._stopping.is_set():
                return  # shutting down: leave it locked; it is redelivered after the lock expires
            self._in_flight += 1
        try:
            self._invoke_and_settle(receiver, message)
        finally:
            with self._in_flight_changed:
                self._in_flight -= 1
                self._in_flight_changed.notify_all()

    def _invoke_and_settle(self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage) -> None:
        function = self.function
        with self._settlements.holding(receiver, message) as held:
            try:
                arguments: dict[str, object] = {
                    function.arg_name: trigger_argument(message, function.trigger_annotation)
                }
                if function.message_actions_arg is not None:
                    arguments[function.message_actions_arg] = ServiceBusMessageActions.get_instance()
                invoke(function.handler, arguments)
            except Exception:
                logger.exception(
                    "function %s failed on message %s (delivery %d)",
                    function.name,
                    message.message_id,
                    message.delivery_count or 0,
                )
                self._settle_after(held, "abandon", lambda: receiver.abandon_message(message))
                return
            self._settle_after(held, "complete", lambda: receiver.complete_message(message))

    def _settle_after(self, held: HeldMessage, outcome: str, action: Callable[[], None]) -> None:
        """The host's own settlement after the invocation: only with autoCompleteMessages, only if the
        function did not settle the message itself. A failure (a lost lock) is logged, as the host does:
        the broker redelivers the message."""
        if not self.auto_complete or held.settled_with is not None:
            return
        try:
            settle(held, outcome, action)
        except Exception as error:
            logger.warning(
                "function %s: %s of message %s failed: %s",
                self.function.name,
                outcome,
                held.message.message_id,
                type(error).__name__,
            )

    def _broker_answered(self, asked: float) -> None:
        """A broker call that began at ``asked`` (monotonic) returned normally."""
        with self._down_lock:
            if self._down_since is not None and asked <= self._down_since:
                return  # began before the outage was noticed: no news about the broker now
            self._down_since = None
        self._worker_failures.count = 0
        self._broker.succeeded()

    def _pause_after(self, error: Exception) -> None:
        if self._stopping.is_set():
            return
        if isinstance(error, SessionLockLostError | MessageLockLostError):
            # A lock that ended (typically one taken before a broker restart) says nothing about the
            # broker being down now: it is not counted in the broker's streak (which would log a
            # second "down" after the broker was already back up); this worker still backs off.
            logger.info("function %s: %s; reopening", self.function.name, type(error).__name__)
        else:
            with self._down_lock:
                if self._down_since is None:
                    self._down_since = time.monotonic()
            self._broker.failed(error)  # logs "down" on the first failure of the streak only
        failures = getattr(self._worker_failures, "count", 0) + 1
        self._worker_failures.count = failures
        delay = compute_backoff(failures, base=_RETRY_BASE, max_backoff=_RETRY_CAP)
        self._stopping.wait(delay.total_seconds())
