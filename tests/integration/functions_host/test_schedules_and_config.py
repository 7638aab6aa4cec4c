"""Pure parts of the local host: NCRONTAB schedules, host.json, local.settings.json, route templates."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from local.functions_host.app_loader import HttpFunction
from local.functions_host.host_config import (
    UNLIMITED_RENEWAL,
    HostConfigError,
    apply_local_settings,
    parse_timespan,
    read_host_json,
)
from local.functions_host.http_server import RouteTable
from local.functions_host.ncrontab import CronSchedule, ScheduleError

MIDNIGHT = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)  # a Thursday


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("* * * * * *", MIDNIGHT, MIDNIGHT + timedelta(seconds=1)),
        ("*/15 * * * * *", MIDNIGHT + timedelta(seconds=1), MIDNIGHT + timedelta(seconds=15)),
        ("0 */5 * * * *", MIDNIGHT, MIDNIGHT + timedelta(minutes=5)),
        ("0 30 9 * * Mon-Fri", MIDNIGHT, MIDNIGHT + timedelta(hours=9, minutes=30)),
        ("0 0 0 * * Sun", MIDNIGHT, MIDNIGHT + timedelta(days=3)),
        ("0 0 12 1 Feb *", MIDNIGHT, datetime(2026, 2, 1, 12, tzinfo=UTC)),
        ("0 0 0 29 2 *", MIDNIGHT, datetime(2028, 2, 29, tzinfo=UTC)),
        ("5,10 0 0 * * *", MIDNIGHT + timedelta(seconds=5), MIDNIGHT + timedelta(seconds=10)),
    ],
)
def test_next_occurrence_follows_ncrontab(expression: str, after: datetime, expected: datetime) -> None:
    """The next fire time honours seconds, steps, ranges, lists, month and day names."""
    assert CronSchedule.parse(expression).next_after(after) == expected


@pytest.mark.parametrize("expression", ["* * * * *", "61 * * * * *", "* * * * * Funday", "*/0 * * * * *"])
def test_invalid_schedule_is_refused_naming_the_problem(expression: str) -> None:
    """Five fields, out-of-range values, unknown names and zero steps are refused."""
    with pytest.raises(ScheduleError):
        CronSchedule.parse(expression)


def test_host_json_service_bus_settings_are_read(tmp_path: Path) -> None:
    """routePrefix and the Service Bus extension settings come from host.json, TimeSpans included."""
    path = tmp_path / "host.json"
    path.write_text(
        json.dumps(
            {
                "version": "2.0",
                "extensions": {
                    "http": {"routePrefix": "/v1/"},
                    "serviceBus": {
                        "maxConcurrentSessions": 3,
                        "maxConcurrentCalls": 7,
                        "sessionIdleTimeout": "00:00:05",
                        "maxAutoLockRenewalDuration": "1.00:00:00",
                        "prefetchCount": 2,
                        "autoCompleteMessages": False,
                    },
                },
            }
        )
    )
    options = read_host_json(path)
    bus = options.service_bus
    assert options.route_prefix == "v1"
    assert (bus.max_concurrent_sessions, bus.max_concurrent_calls, bus.prefetch_count) == (3, 7, 2)
    assert bus.session_idle_timeout == timedelta(seconds=5)
    assert bus.max_auto_lock_renewal_duration == timedelta(days=1)
    assert bus.auto_complete_messages is False


def test_missing_host_json_means_host_defaults(tmp_path: Path) -> None:
    """Without host.json the route prefix is api and the extension defaults apply."""
    options = read_host_json(tmp_path / "host.json")
    assert options.route_prefix == "api"
    assert options.service_bus.max_concurrent_sessions == 8
    assert options.service_bus.max_concurrent_calls == 16 * (os.cpu_count() or 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"maxConcurrentCalls": 0},
        {"prefetchCount": -1},
        {"sessionIdleTimeout": "5s"},
        {"autoCompleteMessages": "false"},
        {"maxConcurrentCallsPerSession": 2},
    ],
)
def test_malformed_service_bus_setting_is_refused(tmp_path: Path, bad: dict[str, object]) -> None:
    """A zero concurrency, a negative prefetch or a duration that is not a TimeSpan is refused."""
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"extensions": {"serviceBus": bad}}))
    with pytest.raises(HostConfigError, match=f"extensions.serviceBus.{next(iter(bad))}"):
        read_host_json(path)


def test_infinite_lock_renewal_is_the_dotnet_infinite_timespan(tmp_path: Path) -> None:
    """maxAutoLockRenewalDuration "-00:00:00.0010000" (Timeout.InfiniteTimeSpan) renews without limit."""
    path = tmp_path / "host.json"
    path.write_text(
        json.dumps({"extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "-00:00:00.0010000"}}})
    )
    assert read_host_json(path).service_bus.max_auto_lock_renewal_duration == UNLIMITED_RENEWAL


def test_timespan_with_fraction() -> None:
    """TimeSpans accept a fractional seconds part."""
    assert parse_timespan("00:01:02.5", setting="x") == timedelta(minutes=1, seconds=2.5)


def test_local_settings_values_become_environment_but_explicit_env_wins(tmp_path: Path) -> None:
    """Values are applied as environment variables unless the variable is already set."""
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": {"A": "from-file", "B": "from-file"}}))
    environ = {"B": "explicit"}
    applied = apply_local_settings(path, environ)
    assert environ == {"A": "from-file", "B": "explicit"}
    assert applied == ["A"]


def _function(route: str, methods: frozenset[str] | None = None) -> HttpFunction:
    return HttpFunction(name=route, handler=print, arg_name="req", route=route, methods=methods)


def test_route_templates_bind_parameters_and_filter_methods() -> None:
    """Templates bind {name}, optional {name?} and catch-all {*rest}; methods filter; 404 and 405 differ."""
    table = RouteTable(
        [
            _function("work-items/{id}", frozenset({"GET"})),
            _function("files/{*path}"),
            _function("docs/{id?}"),
        ],
        "api",
    )
    assert table.resolve("GET", "/api/work-items/w-1") == (table.routes[0].function, {"id": "w-1"})
    assert table.resolve("GET", "/api/files/a/b.txt")[1] == {"path": "a/b.txt"}  # type: ignore[index]
    assert table.resolve("GET", "/api/docs")[1] == {}  # type: ignore[index]
    assert table.resolve("POST", "/api/work-items/w-1") == 405
    assert table.resolve("GET", "/api/work-items/w-1/extra") == 404
