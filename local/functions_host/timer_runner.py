"""Timer triggers: invoke each timer function on its NCRONTAB schedule, one invocation at a time.

As on Azure, a timer function never overlaps itself; when an invocation overruns the next scheduled
time, that occurrence runs late with ``past_due`` set rather than being queued up. Given a
``ListenerLock`` (whenever ``AzureWebJobsStorage`` is set), the schedule runs only while this instance
holds the function's listener lease, so a scaled-out app fires each occurrence once, not once per
instance (listener_lock.py); ``run_on_startup`` fires when the lease is first taken.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from azure.functions.timer import TimerRequest

from local.functions_host.app_loader import TimerFunction
from local.functions_host.invocation import invoke
from local.functions_host.listener_lock import RENEW_EVERY_SECONDS, RETRY_EVERY_SECONDS, ListenerLock
from local.functions_host.ncrontab import CronSchedule

logger = logging.getLogger(__name__)

# An occurrence that starts later than this after its scheduled time is reported as past due.
_PAST_DUE_AFTER = timedelta(seconds=1)


class TimerRunner:
    def __init__(self, function: TimerFunction, lock: ListenerLock | None = None) -> None:
        self.function = function
        self.schedule = CronSchedule.parse(function.schedule)
        self.lock = lock
        self._stopping = threading.Event()
        # Set by stop() and by a lost lease: the schedule loop ends at once.
        self._yield = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"timer-{function.name}", daemon=True)
        self._last: datetime | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._yield.set()
        self._thread.join(timeout)
        if self.lock is not None:
            self.lock.close()

    def _run(self) -> None:
        if self.lock is None:
            self._run_schedule(on_startup=self.function.run_on_startup)
            return
        first = True
        while not self._stopping.is_set():
            if not self.lock.try_acquire():
                self._stopping.wait(RETRY_EVERY_SECONDS)
                continue
            logger.info("timer %s: this instance holds the listener lock", self.function.name)
            self._yield.clear()
            renewer = threading.Thread(target=self._keep_lease, args=(self.lock,), daemon=True)
            renewer.start()
            self._run_schedule(on_startup=first and self.function.run_on_startup)
            first = False
            self._yield.set()
            renewer.join()
            if self._stopping.is_set():
                self.lock.release()

    def _keep_lease(self, lock: ListenerLock) -> None:
        """Renew the lease while the schedule runs; a failed renewal ends it (another instance may
        hold the lease once it expires, and must be the only one firing)."""
        while not self._yield.wait(RENEW_EVERY_SECONDS):
            if not lock.renew():
                logger.warning("timer %s: listener lock lost; this instance stops firing", self.function.name)
                self._yield.set()

    def _run_schedule(self, *, on_startup: bool) -> None:
        now = datetime.now(UTC)
        if on_startup:
            self._fire(scheduled=now, now=now)
        due = self.schedule.next_after(now)
        while not self._yield.wait(max(0.0, (due - datetime.now(UTC)).total_seconds())):
            now = datetime.now(UTC)
            self._fire(scheduled=due, now=now)
            due = self.schedule.next_after(max(due, datetime.now(UTC)))

    def _fire(self, *, scheduled: datetime, now: datetime) -> None:
        upcoming = self.schedule.next_after(now)
        request = TimerRequest(
            past_due=now - scheduled > _PAST_DUE_AFTER,
            schedule={"AdjustForDST": False},
            schedule_status={
                "Last": (self._last or scheduled).isoformat(),
                "Next": upcoming.isoformat(),
                "LastUpdated": now.isoformat(),
            },
        )
        self._last = now
        try:
            invoke(self.function.handler, {self.function.arg_name: request})
        except Exception:
            logger.exception("timer function %s failed", self.function.name)
