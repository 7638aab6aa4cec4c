"""claimcheck.telemetry's pure parts: the W3C tracestate check and propagation when no SDK records."""

from __future__ import annotations

from typing import Any

import pytest
from claimcheck import telemetry
from claimcheck.telemetry import Telemetry, check_tracestate
from claimcheck.testing import consume_and_settle
from opentelemetry.trace import NoOpTracerProvider


@pytest.mark.parametrize(
    "value",
    [
        "vendor=abc",
        "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
        "tenant1@system=value with spaces inside",
        "a=b , c=d",  # optional whitespace around members
        ",".join(f"k{index}=v" for index in range(32)),
    ],
)
def test_well_formed_tracestates_pass(value: str) -> None:
    assert check_tracestate(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Vendor=abc",  # keys are lowercase
        "vendor",  # no value
        "vendor=",  # empty value
        "vendor=a,b",  # a member without '='
        "k=tab\tinside",
        "vendor=x=y",  # '=' inside a value
        "a=1,,b=2",  # an empty member
        "a=1,a=2",  # a repeated key
        ",".join(f"k{index}=v" for index in range(33)),
        "k=" + "v" * 257,  # a value over 256 characters
        "k=" + "v" * 255 + ",j=" + "w" * 255,  # over 512 characters in all
        "k=caf\u00e9",  # not ASCII
        "k=line\nbreak",
    ],
)
def test_malformed_tracestates_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="tracestate"):
        check_tracestate(value)


def test_without_an_sdk_the_callers_trace_context_passes_through_unchanged() -> None:
    """Nothing records spans: the message still carries the caller's traceparent and tracestate."""
    previous = telemetry.use(Telemetry(NoOpTracerProvider()))
    try:
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        with telemetry.intake(parent, "vendor=abc"), telemetry.stage(telemetry.Stage.PUBLISH):
            carried = telemetry.message_context()
        with telemetry.intake(None, None), telemetry.stage(telemetry.Stage.PUBLISH):
            nothing = telemetry.message_context()
    finally:
        telemetry.use(previous)
    assert carried == {"traceparent": parent, "tracestate": "vendor=abc"}
    assert nothing == {}


def test_a_delivery_ahead_of_its_version_records_its_visibility_wait_and_its_retry() -> None:
    """On the shipped fakes: an envelope for a version the producer has not confirmed is polled
    in-process (the visibility wait, as long as the polls slept) and then abandoned (one retry)."""
    from claimcheck import Retry
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.unit.claimcheck.test_core_on_fakes import CONTRACT, make_world

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    previous = telemetry.use(Telemetry(tracer_provider, MeterProvider(metric_readers=[reader])))
    try:
        world = make_world()
        world.submit(CONTRACT, classification="internal")  # inline, version 1
        outcome = consume_and_settle(world.claimcheck.consumer, world.delivery(payload_version=2))
    finally:
        telemetry.use(previous)
    assert isinstance(outcome, Retry)
    assert world.sleeps  # the polls waited (recorded, not slept)
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    (wait,) = points[telemetry.VISIBILITY_WAIT_METRIC]
    assert wait.sum == pytest.approx(sum(world.sleeps))
    (retried,) = points[telemetry.RETRIES_METRIC]
    assert retried.value == 1
    assert telemetry.DEAD_LETTERED_METRIC not in points
    (consume,) = [span for span in spans.get_finished_spans() if span.name == telemetry.CONSUME_SPAN]
    assert consume.attributes is not None
    assert consume.attributes[telemetry.OUTCOME] == "retry"
