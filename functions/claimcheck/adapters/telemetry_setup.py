"""Where the Function App's spans and metrics go: the OpenTelemetry SDK, configured once per worker
process at the edge (function_app.py calls ``configure`` on the first invocation, never at import, so
cold start does not pay for the SDK or the Azure Monitor distro).

- ``CLAIMCHECK_TELEMETRY_DIR`` set (the local stack sets ``.local-stack/telemetry``): OTLP JSON lines,
  ``spans.jsonl`` and ``metrics.jsonl`` (delta temporality: each line is one export interval; an
  interval without measurements writes nothing). ``claimcheck-ops trace`` and ``make demo`` read them.
  Each file is bounded (``CLAIMCHECK_TELEMETRY_FILE_MAX_BYTES``, 8 MiB by default): a line that would
  take it past that moves it to ``<name>.1`` (replacing the older one) and starts it afresh, so a stack
  that runs for days keeps about the last 2 x that of each, and the readers read both files. A process
  that knows its instance (``WEBSITE_INSTANCE_ID``, set by the local host's scale-out) writes files of
  its own, ``spans.<instance>.jsonl``: a rotation renames the file under every other writer, so
  instances sharing one file would overwrite each other's rotated lines.
  The SDK's own variables tune it (``OTEL_BSP_SCHEDULE_DELAY``, ``OTEL_METRIC_EXPORT_INTERVAL``).
- else ``APPLICATIONINSIGHTS_CONNECTION_STRING`` set (Azure): the Azure Monitor OpenTelemetry distro,
  authenticated with Entra ID as ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` says
  (``ClientId=<user-assigned identity>;Authorization=AAD``, the value the host itself uses: the
  component has local auth disabled, so an instrumentation key alone is refused). Its automatic
  instrumentations stay off: the host already reports requests and dependencies, and an HTTP span's
  URL would name a stored object.
- neither: nothing is configured and every telemetry call is a no-op.

Only this module imports the SDK; ``claimcheck.telemetry`` records through the API.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Mapping
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO, cast

from claimcheck.telemetry_settings import (
    INSTANCE_ID_SETTING,
    AzureMonitorTarget,
    azure_monitor_target,
    file_max_bytes,
    local_directory,
)

# The settings themselves are read in the core (pure Python: the app checks them when it is indexed).
from claimcheck.telemetry_settings import TELEMETRY_DIR_SETTING as TELEMETRY_DIR_SETTING  # local/stack.py

SPANS_FILE = "spans.jsonl"
METRICS_FILE = "metrics.jsonl"
SERVICE_NAME = "claimcheck-functions"

# The distro's instrumentations (its "library names"), all turned off.
DISTRO_INSTRUMENTATIONS = (
    "azure_sdk",
    "django",
    "fastapi",
    "flask",
    "psycopg2",
    "requests",
    "urllib",
    "urllib3",
    "httpx",
)

_configured: str | None = None
_lock = threading.Lock()


def rotated(path: Path) -> Path:
    """Where ``path``'s previous lines are once it was rotated."""
    return path.with_name(path.name + ".1")


class _Rollover(RotatingFileHandler):
    def shouldRollover(self, record: logging.LogRecord) -> bool:
        # Never rotate an empty file: a first line longer than the limit would otherwise replace the
        # previous lines with an empty file (the standard library's check counts only the new line).
        path = Path(self.baseFilename)
        return path.exists() and path.stat().st_size > 0 and bool(super().shouldRollover(record))

    def handleError(self, record: logging.LogRecord) -> None:
        # Re-raised to the exporter, which reports the error's type and text; the logging default would
        # print the whole line (a batch of spans) to stderr.
        raise  # called only from emit's except block


class RotatingLines(io.TextIOBase):
    """A text stream of whole lines (the OTLP file exporters write one batch per ``write``) kept to about
    ``2 x max_bytes`` on disk: ``path``, and ``rotated(path)`` with the lines before it. The standard
    library's RotatingFileHandler does the rollover, at line boundaries, so every line stays whole."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self._handler = _Rollover(path, maxBytes=max_bytes, backupCount=1, encoding="utf-8", delay=True)
        self._handler.terminator = ""  # the exporter's lines end in their own newline

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._handler.emit(logging.makeLogRecord({"msg": text}))
        return len(text)

    def close(self) -> None:
        self._handler.close()
        super().close()


def instance_file(name: str, env: Mapping[str, str]) -> str:
    """``name`` (``spans.jsonl``) as this process's own file: ``spans.<instance>.jsonl`` when the process
    knows its instance (letters, digits, ``-`` and ``_`` of its id kept), else ``name`` itself."""
    instance = "".join(
        c for c in env.get(INSTANCE_ID_SETTING, "") if c.isascii() and (c.isalnum() or c in "-_")
    )
    if not instance:
        return name
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.{instance}.{suffix}"


def telemetry_files(directory: Path, name: str) -> list[Path]:
    """Every current file of ``name``'s kind in ``directory`` (one per instance that wrote; each file's
    rotated predecessor is ``rotated(path)``)."""
    stem, _, suffix = name.rpartition(".")
    return sorted({*directory.glob(name), *directory.glob(f"{stem}.*.{suffix}")})


def configure(env: Mapping[str, str]) -> str:
    """Configure the SDK once for this process; returns where telemetry goes ("files", "azure-monitor",
    "none"). Later calls return the first answer."""
    global _configured
    with _lock:
        if _configured is None:
            directory = local_directory(env)
            target = None if directory is not None else azure_monitor_target(env)
            if directory is not None:
                _configure_files(
                    directory,
                    file_max_bytes(env),
                    spans_file=instance_file(SPANS_FILE, env),
                    metrics_file=instance_file(METRICS_FILE, env),
                )
                _configured = "files"
            elif target is not None:
                _configure_azure_monitor(target)
                _configured = "azure-monitor"
            else:
                _configured = "none"
        return _configured


def _configure_files(directory: Path, max_bytes: int, *, spans_file: str, metrics_file: str) -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.exporter.otlp.json.file import FileMetricExporter, FileSpanExporter
    from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    directory.mkdir(parents=True, exist_ok=True)
    resource = Resource.create({"service.name": SERVICE_NAME})
    tracer_provider = TracerProvider(resource=resource)
    # cast: typeshed's TextIOBase is not an IO[str], though it has everything the exporters call.
    spans = FileSpanExporter(stream=cast(IO[str], RotatingLines(directory / spans_file, max_bytes)))
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    delta: dict[type, AggregationTemporality] = {
        Counter: AggregationTemporality.DELTA,
        Histogram: AggregationTemporality.DELTA,
    }
    exporter = FileMetricExporter(
        stream=cast(IO[str], RotatingLines(directory / metrics_file, max_bytes)), preferred_temporality=delta
    )
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(exporter)]
    )
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)


def _configure_azure_monitor(target: AzureMonitorTarget) -> None:
    from azure.identity import ManagedIdentityCredential
    from azure.monitor.opentelemetry import configure_azure_monitor

    # The distro's Functions resource detector names the cloud role after the app; logs of every logger
    # go too (with PYTHON_ENABLE_OPENTELEMETRY the host leaves the worker's logs to the worker).
    configure_azure_monitor(
        connection_string=target.connection_string,
        credential=ManagedIdentityCredential(client_id=target.client_id),
        instrumentation_options={name: {"enabled": False} for name in DISTRO_INSTRUMENTATIONS},
        enable_live_metrics=False,
    )
