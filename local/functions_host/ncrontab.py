"""NCRONTAB schedules as the Functions timer trigger reads them: six fields, seconds first.

``{second} {minute} {hour} {day} {month} {day-of-week}``, each field ``*``, a number or name, a range
``a-b``, a step ``*/n`` or ``a-b/n``, or a comma list of those. Times are UTC (the Functions default
when WEBSITE_TIME_ZONE is unset). Day and day-of-week must both match, as in NCrontab.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1
    )
}
_DAY_NAMES = {name: number for number, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}

# (field name, lowest, highest, names)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day", 1, 31, {}),
    ("month", 1, 12, _MONTH_NAMES),
    ("day-of-week", 0, 6, _DAY_NAMES),
)

# Four years covers every leap-day schedule; a schedule with no time in that span never fires.
_SEARCH_LIMIT = timedelta(days=366 * 4 + 1)


class ScheduleError(ValueError):
    """The schedule is not a valid six-field NCRONTAB expression; the message says which field."""


@dataclass(frozen=True)
class CronSchedule:
    expression: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        fields = expression.split()
        if len(fields) != 6:
            raise ScheduleError(
                f"schedule {expression!r} has {len(fields)} fields; NCRONTAB needs 6 "
                "({second} {minute} {hour} {day} {month} {day-of-week})"
            )
        values = [_parse_field(text, *spec) for text, spec in zip(fields, _FIELDS, strict=True)]
        return cls(expression, *values)

    def next_after(self, moment: datetime) -> datetime:
        """The first scheduled time strictly after ``moment`` (timezone-aware, UTC)."""
        candidate = moment.replace(microsecond=0) + timedelta(seconds=1)
        limit = moment + _SEARCH_LIMIT
        while candidate <= limit:
            if candidate.month not in self.months:
                year, month = divmod(candidate.month, 12)
                candidate = candidate.replace(
                    year=candidate.year + year, month=month + 1, day=1, hour=0, minute=0, second=0
                )
            elif candidate.day not in self.days or _weekday(candidate) not in self.weekdays:
                candidate = (candidate + timedelta(days=1)).replace(hour=0, minute=0, second=0)
            elif candidate.hour not in self.hours:
                candidate = (candidate + timedelta(hours=1)).replace(minute=0, second=0)
            elif candidate.minute not in self.minutes:
                candidate = (candidate + timedelta(minutes=1)).replace(second=0)
            elif candidate.second not in self.seconds:
                candidate += timedelta(seconds=1)
            else:
                return candidate
        raise ScheduleError(f"schedule {self.expression!r} never fires")


def _weekday(moment: datetime) -> int:
    return (moment.weekday() + 1) % 7  # Python: Monday = 0; cron: Sunday = 0


def _parse_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        values.update(_parse_part(part, name, low, high, names))
    return frozenset(values)


def _parse_part(part: str, name: str, low: int, high: int, names: dict[str, int]) -> range:
    base, _, step_text = part.partition("/")
    step = _number(step_text, name, names={}) if step_text else 1
    if step < 1:
        raise ScheduleError(f"{name} field {part!r}: the step must be at least 1")
    if base == "*":
        start, end = low, high
    elif "-" in base:
        first, _, last = base.partition("-")
        start, end = _number(first, name, names), _number(last, name, names)
    else:
        start = _number(base, name, names)
        end = high if step_text else start
    if not low <= start <= end <= high:
        raise ScheduleError(f"{name} field {part!r}: values must be within {low}-{high}, in order")
    return range(start, end + 1, step)


def _number(text: str, name: str, names: dict[str, int]) -> int:
    lowered = text.strip().lower()
    if lowered in names:
        return names[lowered]
    if not lowered.isdigit():
        raise ScheduleError(f"{name} field: {text!r} is not a number")
    return int(lowered)
