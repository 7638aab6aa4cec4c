"""End to end: one document's spans through the local stack (HTTP intake → queue → consumer), exported
by the Functions host as OTLP JSON lines, form one trace whose consume span is linked to the producer's
publish span; a dead-lettered message is counted under its reason; `claimcheck-ops trace` prints the
timeline; no span or metric holds payload bytes, a payload ref or a token (the session's end-of-run
scan, tests/e2e/log_scan.py, covers every span and metric of every e2e test)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from claimcheck import telemetry
from claimcheck.telemetry import CONSUME_SPAN, INTAKE_SPAN, WORK_ITEM_ID, Stage

from local.stack import TELEMETRY_DIR, LocalStack
from scripts.ops import main as ops_main
from scripts.telemetry_files import read_metric_points, read_spans, timeline

from .journey import SAMPLES, auth, dead_letters, wait_for_states, wait_until
from .log_scan import SESSION_NEEDLES, forms_of, leaks, stack_logs


def test_one_documents_trace_links_consumer_to_producer_and_dead_letters_are_counted(
    stack: LocalStack, bus: ServiceBusClient, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    SESSION_NEEDLES.extend(forms_of(marker))
    trace_id, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    headers = {
        **auth(stack),
        "X-Tenant-Id": f"t-{uuid.uuid4().hex[:12]}",
        "X-Purpose": "contract-review",
        "X-Classification": "confidential",  # by reference: all four intake stages
        "Content-Type": "text/plain",
        "traceparent": f"00-{trace_id}-{caller_span}-01",
        "tracestate": "caller=e2e",
    }
    document = (SAMPLES / "service-agreement.txt").read_bytes() + f"\n{marker}\n".encode()
    response = requests.post(f"{stack.api_url}/documents", data=document, headers=headers, timeout=60)
    assert response.status_code == 202, response.text
    receipt = response.json()
    work_item_id, payload_ref = receipt["work_item_id"], receipt["receipt"]["payload_ref"]
    broken_id = f"bad-{uuid.uuid4().hex}"
    with bus.get_queue_sender("documents") as sender:
        broken = ServiceBusMessage(b"{not an envelope", message_id=broken_id, session_id=broken_id)
        sender.send_messages(broken)
    wait_for_states(stack, [work_item_id])
    wait_until(
        lambda: broken_id in {message.message_id for message in dead_letters(bus)},
        "the broken message was not dead-lettered",
    )

    directory = stack.work_dir / TELEMETRY_DIR

    def consumed() -> bool:
        names = {row.span.name for row in timeline(read_spans(directory), work_item_id)}
        return CONSUME_SPAN in names and "consume cleanup" in names

    wait_until(consumed, "the consumer's spans of the document were not exported")
    spans = read_spans(directory)
    rows = timeline(spans, work_item_id)
    intake = next(row.span for row in rows if row.span.name == INTAKE_SPAN)
    consume = next(row.span for row in rows if row.span.name == CONSUME_SPAN)
    publish = next(row.span for row in rows if row.span.name == "intake publish")
    assert (intake.trace_id, intake.parent_id) == (trace_id, caller_span)
    assert consume.trace_id == trace_id  # the consumer joined the producer's trace
    assert (trace_id, publish.span_id) in consume.links  # ... linked to the span that published
    assert consume.attributes[WORK_ITEM_ID] == work_item_id
    assert consume.attributes[telemetry.OUTCOME] == "complete"
    stages = {row.span.attributes.get(telemetry.STAGE) for row in rows}
    assert {stage.value for stage in Stage} <= stages
    # The sync cleanup is the after-settlement step: it starts once the consumer answered Complete and
    # the trigger completed the message, i.e. after the consume span ended, still in its trace.
    cleanup = next(row.span for row in rows if row.span.name == "consume cleanup")
    assert (cleanup.trace_id, cleanup.parent_id) == (trace_id, consume.span_id)
    assert cleanup.start_ns >= consume.end_ns

    def dead_letter_counted() -> bool:
        return any(
            point.name == telemetry.DEAD_LETTERED_METRIC
            and point.attributes.get(telemetry.DEAD_LETTER_REASON) == "invalid_envelope"
            for point in read_metric_points(directory)
        )

    wait_until(dead_letter_counted, "no dead-letter metric with reason invalid_envelope was exported")

    exported = "".join(path.read_text(encoding="utf-8") for path in directory.glob("*.jsonl"))
    for needle in (*forms_of(marker), payload_ref, headers["Authorization"].removeprefix("Bearer ")):
        assert needle not in exported

    assert ops_main(["trace", work_item_id, "--telemetry-dir", str(directory), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    names = [entry["name"] for entry in printed]
    assert names[0] == INTAKE_SPAN
    # The upload of a one-chunk document and its registry record are sent at once (docs/hot-path.md, "Hot
    # path"): either may start first, so the timeline's order between them is not asserted.
    assert {"intake upload", "intake registry"} <= set(names[1:4])
    assert CONSUME_SPAN in names
    assert ops_main(["trace", "wi-never-submitted", "--telemetry-dir", str(directory)]) == 1
    assert "no spans for work item wi-never-submitted" in capsys.readouterr().err


def test_the_session_scan_reads_exported_spans_and_metrics(tmp_path: Path) -> None:
    """Positive control: a marker or a bearer token inside a span attribute or a metric line of the
    stack's telemetry folder is reported by the scan the session runs at the end."""
    marker = f"MARKER-{uuid.uuid4().hex}"
    telemetry_dir = tmp_path / TELEMETRY_DIR
    telemetry_dir.mkdir()
    span = {"key": "claimcheck.work_item_id", "value": {"stringValue": f"wi-{marker}"}}
    (telemetry_dir / "spans.jsonl").write_text(json.dumps({"resourceSpans": [span]}) + "\n", encoding="utf-8")
    (telemetry_dir / "metrics.jsonl").write_text('{"note": "Bearer eyJabc"}\n', encoding="utf-8")
    found = leaks(stack_logs(tmp_path, set()), tmp_path, forms_of(marker))
    assert sorted(found) == [
        f"{TELEMETRY_DIR}/metrics.jsonl: 'Bearer ey'",
        f"{TELEMETRY_DIR}/spans.jsonl: {marker!r}",
    ]
