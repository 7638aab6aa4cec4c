"""Timer triggers: invoke each timer function on its NCRONTAB schedule, one invocation at a time.

As on Azure, a timer function never overlaps itself; when an invocation overruns the next scheduled
time, that occurrence runs late with ``past_due`` set rather than being queued up.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from azure.functions.timer import TimerRequest

from local.functions_host.app_loader import TimerFunction
from local.functions_host.invocation import invoke
from local.functions_host.ncrontab import CronSchedule

logger = logging.getLogger(__name__)

# An occurrence that starts later than this after its scheduled time is reported as past due.
_PAST_DUE_AFTER = timedelta(seconds=1)


class TimerRunner:
    def __init__(self, function: TimerFunction) -> None:
        self.function = function
        self.schedule = CronSchedule.parse(function.schedule)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"timer-{function.name}", daemon=True)
        self._last: datetime | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        now = datetime.now(UTC)
        if self.function.run_on_startup:
            self._fire(scheduled=now, now=now)
        due = self.schedule.next_after(now)
        while not self._stopping.wait(max(0.0, (due - datetime.now(UTC)).total_seconds())):
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
