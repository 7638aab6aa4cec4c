"""host.json and local.settings.json, read the way the Functions host and Core Tools read them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any


class HostConfigError(ValueError):
    """host.json or local.settings.json is malformed; the message names the file and the setting."""


def _default_max_concurrent_calls() -> int:
    """The extension's default: 16 per processor (Utility.GetProcessorCount() * 16)."""
    return 16 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class ServiceBusOptions:
    """The ``extensions.serviceBus`` section; defaults are the Service Bus extension's own (v5).

    ``maxConcurrentCallsPerSession`` must stay 1 (its default; our session workers handle one message at
    a time); ``dynamicConcurrencyEnabled`` and batch options are not run by this host.
    """

    max_concurrent_calls: int = field(default_factory=_default_max_concurrent_calls)
    max_concurrent_sessions: int = 8
    session_idle_timeout: timedelta = timedelta(minutes=1)
    max_auto_lock_renewal_duration: timedelta = timedelta(minutes=5)
    prefetch_count: int = 0
    auto_complete_messages: bool = True


@dataclass(frozen=True)
class HttpOptions:
    """The ``extensions.http`` throttles, under the Functions host's names.

    ``max_concurrent_requests`` functions run at once; up to ``max_outstanding_requests`` requests
    (running plus waiting) are held; the host refuses more with 503 and Retry-After. Azure leaves both
    unbounded by default; locally they are bounded, so a burst degrades into quick refusals, never into
    reset connections or an unbounded pile of threads.
    """

    max_concurrent_requests: int = 16
    max_outstanding_requests: int = 128


@dataclass(frozen=True)
class HostOptions:
    route_prefix: str = "api"
    service_bus: ServiceBusOptions = ServiceBusOptions()
    http: HttpOptions = HttpOptions()


# host.json durations are .NET TimeSpans: "hh:mm:ss", "d.hh:mm:ss", optional ".fffffff" fraction.
_TIMESPAN = re.compile(r"^(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)$")


def parse_timespan(text: str, *, setting: str) -> timedelta:
    match = _TIMESPAN.match(text.strip())
    if match is None:
        raise HostConfigError(f"host.json {setting}: {text!r} is not a TimeSpan like '00:05:00'")
    return timedelta(
        days=int(match["days"] or 0),
        hours=int(match["h"]),
        minutes=int(match["m"]),
        seconds=float(match["s"]),
    )


def read_host_json(path: Path | None) -> HostOptions:
    """Read host.json; a missing file means the host defaults, as on Azure."""
    if path is None or not path.exists():
        return HostOptions()
    document = _read_json(path)
    extensions = document.get("extensions", {})
    http = extensions.get("http", {})
    bus = extensions.get("serviceBus", {})
    if bus.get("maxConcurrentCallsPerSession", 1) != 1:
        raise HostConfigError(
            f"{path}: extensions.serviceBus.maxConcurrentCallsPerSession other than 1 is not supported "
            "by the local host"
        )
    defaults = ServiceBusOptions()
    route_prefix = http.get("routePrefix", "api")
    if not isinstance(route_prefix, str):
        raise HostConfigError(f"{path}: extensions.http.routePrefix must be a string")
    http_defaults = HttpOptions()
    concurrent = _limit(http, "maxConcurrentRequests", http_defaults.max_concurrent_requests, path)
    outstanding = _limit(http, "maxOutstandingRequests", http_defaults.max_outstanding_requests, path)
    return HostOptions(
        route_prefix=route_prefix.strip("/"),
        http=HttpOptions(
            max_concurrent_requests=concurrent, max_outstanding_requests=max(outstanding, concurrent)
        ),
        service_bus=ServiceBusOptions(
            max_concurrent_calls=_positive(bus, "maxConcurrentCalls", defaults.max_concurrent_calls, path),
            max_concurrent_sessions=_positive(
                bus, "maxConcurrentSessions", defaults.max_concurrent_sessions, path
            ),
            session_idle_timeout=_duration(bus, "sessionIdleTimeout", defaults.session_idle_timeout),
            max_auto_lock_renewal_duration=_renewal_duration(bus, defaults.max_auto_lock_renewal_duration),
            prefetch_count=_non_negative(bus, "prefetchCount", defaults.prefetch_count, path),
            auto_complete_messages=_flag(bus, "autoCompleteMessages", defaults.auto_complete_messages, path),
        ),
    )


def apply_local_settings(path: Path | None, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Copy local.settings.json "Values" into the environment; an explicit variable wins (Core Tools).

    Returns the names that were set, so a caller can say what it applied without printing values.
    """
    if path is None or not path.exists():
        return []
    target = os.environ if environ is None else environ
    values = _read_json(path).get("Values", {})
    if not isinstance(values, Mapping):
        raise HostConfigError(f'{path}: "Values" must be an object of strings')
    applied = []
    for name, value in values.items():
        if name not in target:
            target[name] = str(value)
            applied.append(name)
    return applied


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise HostConfigError(f"{path} is not readable JSON: {error}") from error
    if not isinstance(document, dict):
        raise HostConfigError(f"{path} must contain a JSON object")
    return document


def _limit(section: Mapping[str, Any], key: str, default: int, path: Path) -> int:
    """An ``extensions.http`` throttle: a whole number >= 1 (Azure's -1, "unbounded", keeps our default)."""
    raw = section.get(key, default)
    if raw == -1:
        return default
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise HostConfigError(f"{path}: extensions.http.{key} must be a whole number >= 1 or -1, got {raw!r}")
    return raw


def _flag(section: Mapping[str, Any], key: str, default: bool, path: Path) -> bool:
    raw = section.get(key, default)
    if not isinstance(raw, bool):
        raise HostConfigError(f"{path}: extensions.serviceBus.{key} must be true or false, got {raw!r}")
    return raw


# .NET's Timeout.InfiniteTimeSpan as host.json spells it: renew the lock for as long as the function runs
# (a century here: the SDK's renewer adds the limit to datetimes, which timedelta.max would overflow).
_INFINITE_TIMESPAN = "-00:00:00.0010000"
UNLIMITED_RENEWAL = timedelta(days=36500)


def _renewal_duration(section: Mapping[str, Any], default: timedelta) -> timedelta:
    if str(section.get("maxAutoLockRenewalDuration", "")).strip() == _INFINITE_TIMESPAN:
        return UNLIMITED_RENEWAL
    return _duration(section, "maxAutoLockRenewalDuration", default)


def _duration(section: Mapping[str, Any], key: str, default: timedelta) -> timedelta:
    raw = section.get(key)
    return default if raw is None else parse_timespan(str(raw), setting=f"extensions.serviceBus.{key}")


def _positive(section: Mapping[str, Any], key: str, default: int, path: Path) -> int:
    value = _non_negative(section, key, default, path)
    if value == 0:
        raise HostConfigError(f"{path}: extensions.serviceBus.{key} must be at least 1")
    return value


def _non_negative(section: Mapping[str, Any], key: str, default: int, path: Path) -> int:
    raw = section.get(key, default)
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise HostConfigError(f"{path}: extensions.serviceBus.{key} must be a whole number >= 0, got {raw!r}")
    return raw
