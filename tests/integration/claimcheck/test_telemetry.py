"""Spans and metrics of one document through intake and consumption, against Azurite, recorded with
the OpenTelemetry SDK's in-memory exporters (claimcheck.telemetry records through the API only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from claimcheck import Complete, DeadLetter, DeadLetterReason, InboundMessage, telemetry
from claimcheck.telemetry import CONSUME_STAGES, INTAKE_STAGES, Telemetry
from claimcheck.testing import consume_and_settle
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.integration.claimcheck.conftest import PAYLOAD_MARKER, Harness, document

Build = Callable[..., Harness]
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_PARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@dataclass
class Recorded:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, point) of every data point of metric ``name``."""
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), point)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    previous = telemetry.use(Telemetry(tracer_provider, MeterProvider(metric_readers=[reader])))
    try:
        yield Recorded(spans, reader)
    finally:
        telemetry.use(previous)


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [span for span in spans if span.name == name]
    return span


def test_consumer_span_is_linked_to_the_producers_publish_and_stages_are_children(
    make_harness: Build, recorded: Recorded
) -> None:
    """One document by reference: the intake span (child of the caller's traceparent) has the four
    intake stages, the message carries the publish span's context and the caller's tracestate, and the
    consume span is in the same trace, linked to the publish span, with the seven consumer stages."""
    harness = make_harness()
    receipt = harness.claimcheck.producer.submit(
        document(300_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
        traceparent=CALLER_PARENT,
        tracestate="vendor=abc,other@sys=1",
    )
    delivery = harness.delivery()
    assert consume_and_settle(harness.claimcheck.consumer, delivery) == Complete()

    spans = recorded.spans.get_finished_spans()
    intake, consume = _named(spans, telemetry.INTAKE_SPAN), _named(spans, telemetry.CONSUME_SPAN)
    publish = _named(spans, "intake publish")
    assert intake.parent is not None
    assert intake.parent.span_id == int("00f067aa0ba902b7", 16)
    assert intake.context.trace_id == int(CALLER_TRACE, 16) == consume.context.trace_id
    assert intake.attributes is not None
    assert consume.attributes is not None
    assert intake.attributes[telemetry.WORK_ITEM_ID] == receipt.work_item_id
    assert intake.attributes[telemetry.TRANSPORT] == "reference"
    assert consume.attributes[telemetry.WORK_ITEM_ID] == receipt.work_item_id
    assert consume.attributes[telemetry.OUTCOME] == "complete"
    properties = delivery.application_properties
    assert properties["traceparent"] == f"00-{CALLER_TRACE}-{publish.context.span_id:016x}-01"
    assert properties["tracestate"] == "vendor=abc,other@sys=1"
    assert consume.kind is SpanKind.CONSUMER
    assert publish.kind is SpanKind.PRODUCER
    assert [link.context.span_id for link in consume.links] == [publish.context.span_id]
    (event,) = harness.results()
    result_publish = _named(spans, "consume result_publish")
    assert event.application_properties["traceparent"] == (
        f"00-{CALLER_TRACE}-{result_publish.context.span_id:016x}-01"
    )
    children = {span.name: span for span in spans if span.parent is not None}
    for stage in INTAKE_STAGES:
        assert children[f"intake {stage.value}"].parent.span_id == intake.context.span_id  # type: ignore[union-attr]
    for stage in CONSUME_STAGES:
        assert children[f"consume {stage.value}"].parent.span_id == consume.context.span_id  # type: ignore[union-attr]

    staged = {
        attributes[telemetry.STAGE] for attributes, _ in recorded.points(telemetry.STAGE_DURATION_METRIC)
    }
    assert staged == {stage.value for stage in telemetry.Stage}
    (accepted,) = recorded.points(telemetry.ACCEPTED_METRIC)
    assert accepted[0] == {telemetry.PURPOSE: "contract-review", telemetry.TRANSPORT: "reference"}
    assert accepted[1].value == 1
    (size,) = recorded.points(telemetry.PAYLOAD_SIZE_METRIC)
    assert size[1].sum == 300_000
    (completed,) = recorded.points(telemetry.COMPLETED_METRIC)
    assert completed[1].value == 1
    assert PAYLOAD_MARKER not in _exported_text(recorded)
    assert receipt.payload_ref is not None
    assert receipt.payload_ref not in _exported_text(recorded)


def test_dead_letter_reason_is_counted_and_failed_stage_names_only_the_exception_type(
    make_harness: Build, recorded: Recorded
) -> None:
    """A tampered object: fetch fails with IntegrityFailed (its type on the span, no exception text or
    event), the delivery is dead-lettered and counted under its reason."""
    harness = make_harness()
    receipt = harness.claimcheck.producer.submit(
        document(200_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    assert receipt.payload_ref is not None
    blob = harness.container.get_blob_client(receipt.payload_ref)
    tags = blob.get_blob_tags()
    blob.upload_blob(document(200_000, marker="TAMPERED-1234"), overwrite=True, tags=tags)
    outcome = consume_and_settle(harness.claimcheck.consumer, harness.delivery())
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason is DeadLetterReason.INTEGRITY_FAILED

    spans = recorded.spans.get_finished_spans()
    fetch, consume = _named(spans, "consume fetch"), _named(spans, telemetry.CONSUME_SPAN)
    assert fetch.status.status_code is StatusCode.ERROR
    assert fetch.attributes is not None
    assert fetch.attributes[telemetry.ERROR_TYPE] == "IntegrityFailed"
    assert fetch.events == ()  # no exception event: its message could quote what the code saw
    assert consume.attributes is not None
    assert consume.attributes[telemetry.DEAD_LETTER_REASON] == "integrity_failed"
    (dead,) = recorded.points(telemetry.DEAD_LETTERED_METRIC)
    assert dead == ({telemetry.DEAD_LETTER_REASON: "integrity_failed"}, dead[1])
    assert dead[1].value == 1
    failed = [a for a, _ in recorded.points(telemetry.STAGE_DURATION_METRIC) if telemetry.ERROR_TYPE in a]
    assert failed == [
        {telemetry.STAGE: "fetch", telemetry.FLOW: "consume", telemetry.ERROR_TYPE: "IntegrityFailed"}
    ]


def test_a_malformed_tracestate_in_a_message_is_dropped_and_the_delivery_still_processed(
    make_harness: Build, recorded: Recorded
) -> None:
    harness = make_harness()
    harness.claimcheck.producer.submit(
        document(50_000),
        tenant_id="tenant-a",
        purpose="contract-review",
        classification="confidential",
        content_type="text/plain",
    )
    sent = harness.delivery()
    properties = {**sent.application_properties, "tracestate": "Not A=Valid,,State"}
    delivery = InboundMessage(
        body=sent.body,
        message_id=sent.message_id,
        delivery_count=1,
        session_id=sent.session_id,
        application_properties=properties,
    )
    assert consume_and_settle(harness.claimcheck.consumer, delivery) == Complete()
    consume = _named(recorded.spans.get_finished_spans(), telemetry.CONSUME_SPAN)
    assert len(consume.links) == 1
    assert consume.links[0].context.trace_state.to_header() == ""


def _exported_text(recorded: Recorded) -> str:
    spans = [json.loads(span.to_json()) for span in recorded.spans.get_finished_spans()]
    data = recorded.metrics.get_metrics_data()
    return json.dumps(spans) + (data.to_json() if data is not None else "")
