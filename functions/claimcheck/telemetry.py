"""OpenTelemetry for the claim-check flow (issue 14): a span per stage, the flow's metrics, and the
trace context that travels in each message.

Only ``opentelemetry-api`` is imported here: the core records spans and measurements through the API's
global providers, and whoever runs the core decides where they go (``claimcheck.adapters.telemetry_setup``:
Azure Monitor on Azure, JSON-lines files under ``.local-stack/`` locally, nothing at all otherwise,
when every call below is a no-op). Instruments are created once on the API's proxies, so the SDK may
be configured after this module is imported.

What an attribute may hold: work item ids, versions, purposes, stage names, transports, dead-letter
reasons, byte counts and exception type names. Never payload bytes, a payload ref (it names the
stored object), a token, a key or an exception's text (a foreign one may quote a URL):
tests/e2e/test_telemetry.py scans every exported span and metric of an end-to-end run for them.

Intake: ``intake()`` is the parent of the stages ``upload`` (with the sha256 in the same pass),
``registry``, ``publish`` and ``activate``; the message carries the publish span's context
(``message_context()``). Consumption: ``consuming()`` is linked to that context (and parented on it
unless the Functions host already gave the invocation a trace) and is the parent of ``resolve``,
``authorize``, ``fetch`` (with the verification), ``analyze``, ``result_write``, ``result_publish`` and
``cleanup``.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from enum import StrEnum
from typing import Any, ParamSpec, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from claimcheck.outcome import DeadLetter, Outcome, Retry

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
M = TypeVar("M", bound="_Delivery")

INSTRUMENTATION_NAME = "claimcheck"
INTAKE_SPAN = "claimcheck intake"
CONSUME_SPAN = "claimcheck consume"

# Attribute names: one spelling, used by the spans, the metrics, `claimcheck-ops trace` and the demo.
WORK_ITEM_ID = "claimcheck.work_item_id"
PAYLOAD_VERSION = "claimcheck.payload_version"
PURPOSE = "claimcheck.purpose"
TRANSPORT = "claimcheck.transport"
STAGE = "claimcheck.stage"
FLOW = "claimcheck.flow"
OUTCOME = "claimcheck.outcome"
DEAD_LETTER_REASON = "claimcheck.dead_letter_reason"
ERROR_TYPE = "error.type"

# Metric names (unit in the instrument).
ACCEPTED_METRIC = "claimcheck.documents.accepted"
COMPLETED_METRIC = "claimcheck.documents.completed"
DEAD_LETTERED_METRIC = "claimcheck.documents.dead_lettered"
PAYLOAD_SIZE_METRIC = "claimcheck.payload.size"
STAGE_DURATION_METRIC = "claimcheck.stage.duration"
VISIBILITY_WAIT_METRIC = "claimcheck.visibility.wait"
RETRIES_METRIC = "claimcheck.deliveries.retried"

TRACEPARENT_PROPERTY = "traceparent"
TRACESTATE_PROPERTY = "tracestate"

# W3C Trace Context level 1, tracestate: at most 32 comma-separated key=value members, keys simple
# (lowercase) or multi-tenant (tenant@system), values of printable ASCII without ',' and '=' that do
# not end in a space; 512 characters at most (the length every vendor must propagate).
_KEY = r"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
_VALUE = r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
_MEMBER = re.compile(rf"[ \t]*({_KEY})=({_VALUE})[ \t]*")
MAX_TRACESTATE_CHARS = 512
MAX_TRACESTATE_MEMBERS = 32


class Stage(StrEnum):
    """The stages a document goes through; each is a span and a ``claimcheck.stage.duration`` series."""

    UPLOAD = "upload"  # write-once upload, sha256 in the same pass
    REGISTRY = "registry"
    PUBLISH = "publish"
    ACTIVATE = "activate"
    RESOLVE = "resolve"
    AUTHORIZE = "authorize"
    FETCH = "fetch"  # streaming download, length/type/sha256 verified while reading
    ANALYZE = "analyze"
    RESULT_WRITE = "result_write"
    RESULT_PUBLISH = "result_publish"
    CLEANUP = "cleanup"


INTAKE_STAGES = (Stage.UPLOAD, Stage.REGISTRY, Stage.PUBLISH, Stage.ACTIVATE)
CONSUME_STAGES = tuple(stage for stage in Stage if stage not in INTAKE_STAGES)


def check_tracestate(value: str) -> str:
    """``value`` if it is a well-formed W3C tracestate, else ValueError naming what is wrong."""
    if len(value) > MAX_TRACESTATE_CHARS:
        raise ValueError(f"tracestate is longer than {MAX_TRACESTATE_CHARS} characters")
    members = value.split(",")
    if len(members) > MAX_TRACESTATE_MEMBERS:
        raise ValueError(f"tracestate has more than {MAX_TRACESTATE_MEMBERS} members")
    keys = []
    for member in members:
        match = _MEMBER.fullmatch(member)
        if match is None:
            raise ValueError("tracestate is not a W3C trace context tracestate (key=value list)")
        keys.append(match.group(1))
    if len(set(keys)) != len(keys):
        raise ValueError("tracestate repeats a key")
    return value


def _carrier(properties: Mapping[str, Any]) -> dict[str, str]:
    """The well-formed trace context among a message's application properties (a malformed value is
    dropped, as W3C Trace Context asks: the trace starts anew instead of failing the delivery)."""
    carrier: dict[str, str] = {}
    traceparent = properties.get(TRACEPARENT_PROPERTY)
    if not isinstance(traceparent, str):
        return carrier
    carrier[TRACEPARENT_PROPERTY] = traceparent
    tracestate = properties.get(TRACESTATE_PROPERTY)
    if isinstance(tracestate, str):
        with suppress(ValueError):
            carrier[TRACESTATE_PROPERTY] = check_tracestate(tracestate)
    return carrier


# Histogram buckets (advisory; a view may override): seconds from a millisecond to a minute, and payload
# sizes from a kibibyte to the 2 GiB maximum.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZE_BUCKETS = tuple(float(2**power) for power in range(10, 32, 2))


class Telemetry:
    """The tracer and instruments of the claim-check flow, from the given providers (the API's global
    ones by default; tests pass the SDK's with in-memory exporters)."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self.propagator = TraceContextTextMapPropagator()
        self.accepted = meter.create_counter(
            ACCEPTED_METRIC, unit="{document}", description="Documents accepted at intake"
        )
        self.completed = meter.create_counter(
            COMPLETED_METRIC, unit="{document}", description="Documents whose result effect was confirmed"
        )
        self.dead_lettered = meter.create_counter(
            DEAD_LETTERED_METRIC, unit="{message}", description="Messages dead-lettered, by reason"
        )
        self.payload_size = meter.create_histogram(
            PAYLOAD_SIZE_METRIC,
            unit="By",
            description="Payload bytes accepted at intake",
            explicit_bucket_boundaries_advisory=SIZE_BUCKETS,
        )
        self.stage_duration = meter.create_histogram(
            STAGE_DURATION_METRIC,
            unit="s",
            description="Duration of each intake and consumer stage",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.visibility_wait = meter.create_histogram(
            VISIBILITY_WAIT_METRIC,
            unit="s",
            description="Time a delivery waited in-process for its version to become visible",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.retries = meter.create_counter(
            RETRIES_METRIC, unit="{delivery}", description="Deliveries abandoned to be retried"
        )


_active = Telemetry()


def use(telemetry: Telemetry) -> Telemetry:
    """Record through ``telemetry`` from now on; returns the one it replaces (tests restore it)."""
    global _active
    previous, _active = _active, telemetry
    return previous


def _parent(remote: Context | None) -> Context | None:
    """The span already current (e.g. the Functions host's invocation), else the remote context."""
    if trace.get_current_span().get_span_context().is_valid:
        return None  # start_as_current_span then uses the current context
    return remote


@contextmanager
def intake(traceparent: str | None = None, tracestate: str | None = None) -> Iterator[None]:
    """The root span of one submission; a caller's W3C trace context is its parent when no span is
    current (the Functions host's request span is, on Azure)."""
    carrier = {} if traceparent is None else _carrier({"traceparent": traceparent, "tracestate": tracestate})
    remote = _active.propagator.extract(carrier) if carrier else None
    with _span(INTAKE_SPAN, _parent(remote), SpanKind.INTERNAL, links=()):
        yield


def intake_span(submit: Callable[P, R]) -> Callable[P, R]:
    """Decorates ``Producer.submit``: the call runs in ``intake()`` with its ``traceparent`` and
    ``tracestate`` keywords."""

    @functools.wraps(submit)
    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        traceparent, tracestate = kwargs.get("traceparent"), kwargs.get("tracestate")
        with intake(
            traceparent if isinstance(traceparent, str) else None,
            tracestate if isinstance(tracestate, str) else None,
        ):
            return submit(*args, **kwargs)

    return traced


class _Delivery(Protocol):
    @property
    def application_properties(self) -> Mapping[str, Any]: ...


def consumption_span(handle: Callable[[S, M], Outcome]) -> Callable[[S, M], Outcome]:
    """Decorates ``Consumer.handle``: the delivery runs in ``consuming()`` and its outcome is counted
    (``settled``)."""

    @functools.wraps(handle)
    def traced(consumer: S, message: M) -> Outcome:
        with consuming(message.application_properties):
            outcome = handle(consumer, message)
            settled(outcome)
            return outcome

    return traced


def in_current_trace(step: Callable[[], None]) -> Callable[[], None]:
    """``step``, to be run later (after the current span ended), with the span current now as its
    parent: the cleanup that follows a message's completion stays in the delivery's trace."""
    captured = otel_context.get_current()

    def run() -> None:
        token = otel_context.attach(captured)
        try:
            step()
        finally:
            otel_context.detach(token)

    return run


@contextmanager
def consuming(properties: Mapping[str, Any]) -> Iterator[None]:
    """The span of one delivery, linked to the producer's publish span through the message's
    ``traceparent``/``tracestate`` and its child when no other span is current."""
    carrier = _carrier(properties)
    remote = _active.propagator.extract(carrier) if carrier else None
    producer = None if remote is None else trace.get_current_span(remote).get_span_context()
    links = () if producer is None or not producer.is_valid else (Link(producer),)
    with _span(CONSUME_SPAN, _parent(remote), SpanKind.CONSUMER, links=links):
        yield


@contextmanager
def _span(name: str, parent: Context | None, kind: SpanKind, links: tuple[Link, ...]) -> Iterator[None]:
    with _active.tracer.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        links=links,
        record_exception=False,  # an exception's text may quote a URL: its type only, below
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute(ERROR_TYPE, type(exc).__name__)
            raise


@contextmanager
def stage(name: Stage) -> Iterator[None]:
    """A child span of the current one for ``name``, and its duration in ``claimcheck.stage.duration``
    (``error.type`` set when it raised)."""
    flow = "intake" if name in INTAKE_STAGES else "consume"
    attributes: dict[str, str] = {STAGE: name.value, FLOW: flow}
    started = time.perf_counter()
    try:
        with _span(f"{flow} {name.value}", None, _kind(name), links=()):
            trace.get_current_span().set_attributes(attributes)
            yield
    except BaseException as exc:
        attributes[ERROR_TYPE] = type(exc).__name__
        raise
    finally:
        _active.stage_duration.record(time.perf_counter() - started, attributes)


def _kind(name: Stage) -> SpanKind:
    return SpanKind.PRODUCER if name in (Stage.PUBLISH, Stage.RESULT_PUBLISH) else SpanKind.INTERNAL


def message_context() -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of the current span, for a message's application properties;
    empty when no trace is being recorded or propagated."""
    carrier: dict[str, str] = {}
    _active.propagator.inject(carrier)
    return carrier


def describe(work_item_id: str, version: int, purpose: str, transport: str | None = None) -> None:
    """Name the document on the current span (the intake or consume span)."""
    attributes: dict[str, str | int] = {
        WORK_ITEM_ID: work_item_id,
        PAYLOAD_VERSION: version,
        PURPOSE: purpose,
    }
    if transport is not None:
        attributes[TRANSPORT] = transport
    trace.get_current_span().set_attributes(attributes)


def accepted(purpose: str, transport: str, length: int) -> None:
    attributes = {PURPOSE: purpose, TRANSPORT: transport}
    trace.get_current_span().set_attribute(TRANSPORT, transport)
    _active.accepted.add(1, attributes)
    _active.payload_size.record(length, attributes)


def completed(purpose: str) -> None:
    _active.completed.add(1, {PURPOSE: purpose})


def waited_for_visibility(seconds: float) -> None:
    _active.visibility_wait.record(seconds)


def settled(outcome: Outcome) -> None:
    """Count a delivery's retry or dead-letter, and say it on its span."""
    span = trace.get_current_span()
    if isinstance(outcome, DeadLetter):
        reason = outcome.reason.value
        _active.dead_lettered.add(1, {DEAD_LETTER_REASON: reason})
        span.set_attributes({OUTCOME: "dead_letter", DEAD_LETTER_REASON: reason})
        span.set_status(Status(StatusCode.ERROR, f"dead-lettered: {reason}"))
    elif isinstance(outcome, Retry):
        _active.retries.add(1)
        span.set_attribute(OUTCOME, "retry")
    else:
        span.set_attribute(OUTCOME, "complete")
