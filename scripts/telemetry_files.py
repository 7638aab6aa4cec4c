"""The local stack's telemetry files (OTLP JSON lines, claimcheck.adapters.telemetry_setup) read back:
spans as flat records, a work item's timeline, per-stage timings and metric data points. Standard
library only; `claimcheck-ops trace`, the demo and the end-to-end tests share it."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from claimcheck.adapters.telemetry_setup import METRICS_FILE, SPANS_FILE, rotated, telemetry_files
from claimcheck.telemetry import CONSUME_SPAN, INTAKE_SPAN, STAGE, WORK_ITEM_ID, Stage

_ROOTS = (INTAKE_SPAN, CONSUME_SPAN)


@dataclass(frozen=True)
class SpanRecord:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id) of each linked span
    status: str  # "", "ok" or "error"

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class MetricPoint:
    name: str
    attributes: Mapping[str, Any]
    value: float  # a sum's value, or a histogram's sum
    count: int  # a histogram's count; 1 for a sum


@dataclass
class TimelineRow:
    span: SpanRecord
    depth: int
    offset_ms: float
    linked_to: list[str] = field(default_factory=list)  # names of the spans this one links to


def _value(raw: Mapping[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in raw:
            return raw[kind]
    if "intValue" in raw:
        return int(raw["intValue"])
    if "arrayValue" in raw:
        return [_value(item) for item in raw["arrayValue"].get("values", [])]
    return None


def _attributes(raw: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value", {})) for item in raw or ()}


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The batches of a telemetry file and of its rotated predecessor (``<name>.1``), oldest first.

    The current file is opened first: if it is rotated before the predecessor is opened, the
    predecessor is the very file already open (same inode) and is read once, not twice."""
    with contextlib.ExitStack() as files:
        opened: list[TextIO] = []
        for candidate in (path, rotated(path)):
            try:
                handle = files.enter_context(candidate.open(encoding="utf-8"))
            except FileNotFoundError:
                continue
            if all(os.fstat(handle.fileno()).st_ino != os.fstat(seen.fileno()).st_ino for seen in opened):
                opened.append(handle)
        for oldest_first in reversed(opened):
            for line in oldest_first:
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line being written right now


def _all_lines(directory: Path, name: str) -> Iterator[dict[str, Any]]:
    """The batches of every instance's file of ``name``'s kind (each with its rotated predecessor)."""
    for path in telemetry_files(directory, name):
        yield from _lines(path)


def read_spans(directory: Path) -> list[SpanRecord]:
    records = []
    for batch in _all_lines(directory, SPANS_FILE):
        for resource in batch.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    status = span.get("status", {}).get("code", 0)
                    records.append(
                        SpanRecord(
                            trace_id=span["traceId"],
                            span_id=span["spanId"],
                            parent_id=span.get("parentSpanId") or None,
                            name=span["name"],
                            start_ns=int(span["startTimeUnixNano"]),
                            end_ns=int(span["endTimeUnixNano"]),
                            attributes=_attributes(span.get("attributes")),
                            links=tuple((link["traceId"], link["spanId"]) for link in span.get("links", [])),
                            status={1: "ok", 2: "error"}.get(status, ""),
                        )
                    )
    return records


def read_metric_points(directory: Path) -> list[MetricPoint]:
    points = []
    for batch in _all_lines(directory, METRICS_FILE):
        for resource in batch.get("resourceMetrics", []):
            for scope in resource.get("scopeMetrics", []):
                for metric in scope.get("metrics", []):
                    if "sum" in metric:
                        for point in metric["sum"].get("dataPoints", []):
                            value = float(point.get("asInt", point.get("asDouble", 0)))
                            points.append(
                                MetricPoint(metric["name"], _attributes(point.get("attributes")), value, 1)
                            )
                    elif "histogram" in metric:
                        for point in metric["histogram"].get("dataPoints", []):
                            points.append(
                                MetricPoint(
                                    metric["name"],
                                    _attributes(point.get("attributes")),
                                    float(point.get("sum", 0.0)),
                                    int(point.get("count", 0)),
                                )
                            )
    return points


def timeline(spans: Sequence[SpanRecord], work_item_id: str) -> list[TimelineRow]:
    """The work item's intake and consume spans (every version and delivery) with their stages under
    them, in start order; offsets from the first span's start."""
    roots = sorted(
        (span for span in spans if span.name in _ROOTS and span.attributes.get(WORK_ITEM_ID) == work_item_id),
        key=lambda span: span.start_ns,
    )
    if not roots:
        return []
    children: dict[str, list[SpanRecord]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    names = {span.span_id: span.name for span in spans}
    origin = roots[0].start_ns
    rows: list[TimelineRow] = []

    def walk(span: SpanRecord, depth: int) -> None:
        linked = [names.get(span_id, f"{trace_id[:8]}…/{span_id}") for trace_id, span_id in span.links]
        rows.append(TimelineRow(span, depth, (span.start_ns - origin) / 1e6, linked))
        for child in sorted(children.get(span.span_id, []), key=lambda child: child.start_ns):
            if child.name not in _ROOTS:  # a consume span parented on intake is listed as a root
                walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return rows


@dataclass(frozen=True)
class StageTiming:
    stage: str
    count: int
    median_ms: float
    p95_ms: float
    max_ms: float


def stage_timings(
    spans: Sequence[SpanRecord], work_item_ids: Sequence[str] | None = None
) -> list[StageTiming]:
    """Per stage, in flow order: how many spans, their median, 95th percentile and maximum duration;
    only under the given work items' intake and consume spans when ``work_item_ids`` is given."""
    wanted = None if work_item_ids is None else set(work_item_ids)
    roots = {
        span.span_id
        for span in spans
        if span.name in _ROOTS and (wanted is None or span.attributes.get(WORK_ITEM_ID) in wanted)
    }
    durations: dict[str, list[float]] = {}
    for span in spans:
        stage = span.attributes.get(STAGE)
        if isinstance(stage, str) and span.parent_id in roots:
            durations.setdefault(stage, []).append(span.duration_ms)
    timings = []
    for stage in Stage:
        values = sorted(durations.get(stage.value, []))
        if values:
            p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
            timings.append(StageTiming(stage.value, len(values), statistics.median(values), p95, values[-1]))
    return timings
