"""claimcheck.adapters.telemetry_setup: which exporter the app settings choose, the Entra identity for Azure
Monitor, and the local JSON-lines files (in a child process: the SDK's global providers are set once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claimcheck.adapters import telemetry_setup
from claimcheck.adapters.telemetry_setup import (
    SPANS_FILE,
    RotatingLines,
    instance_file,
    rotated,
    telemetry_files,
)
from claimcheck.settings import SettingsError
from claimcheck.telemetry import CONSUME_SPAN, INTAKE_SPAN, WORK_ITEM_ID
from claimcheck.telemetry_settings import (
    DEFAULT_FILE_MAX_BYTES,
    FILE_MAX_BYTES_SETTING,
    AzureMonitorTarget,
    azure_monitor_target,
    file_max_bytes,
)

from scripts.telemetry_files import read_spans, timeline

CONNECTION = "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x.invalid/"


def test_azure_monitor_target_uses_the_identity_the_authentication_string_names() -> None:
    env = {
        "APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION,
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "ClientId=1111-2222;Authorization=AAD",
    }
    assert azure_monitor_target(env) == AzureMonitorTarget(CONNECTION, "1111-2222")
    system_assigned = {**env, "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "Authorization=AAD"}
    assert azure_monitor_target(system_assigned) == AzureMonitorTarget(CONNECTION, None)
    assert azure_monitor_target({}) is None


@pytest.mark.parametrize("authentication", [None, "", "ClientId=1111-2222", "Authorization=Key"])
def test_an_instrumentation_key_alone_is_refused_naming_the_setting(authentication: str | None) -> None:
    env = {"APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION}
    if authentication is not None:
        env["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] = authentication
    with pytest.raises(SettingsError, match="APPLICATIONINSIGHTS_AUTHENTICATION_STRING") as refused:
        azure_monitor_target(env)
    assert "00000000-0000" not in str(refused.value)


def test_azure_monitor_gets_the_managed_identity_and_no_automatic_instrumentation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import azure.monitor.opentelemetry as distro
    from azure.identity import ManagedIdentityCredential

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(distro, "configure_azure_monitor", lambda **kwargs: calls.append(kwargs))
    telemetry_setup._configure_azure_monitor(AzureMonitorTarget(CONNECTION, "1111-2222"))
    (call,) = calls
    assert call["connection_string"] == CONNECTION
    assert isinstance(call["credential"], ManagedIdentityCredential)
    assert call["instrumentation_options"] == {
        name: {"enabled": False} for name in telemetry_setup.DISTRO_INSTRUMENTATIONS
    }


_PROBE = """
import sys
from pathlib import Path
from claimcheck import telemetry
from claimcheck.adapters import telemetry_setup
from claimcheck.outcome import DeadLetter, DeadLetterReason
from opentelemetry import metrics, trace

directory = Path(sys.argv[1])
first = telemetry_setup.configure({"CLAIMCHECK_TELEMETRY_DIR": str(directory)})
again = telemetry_setup.configure({})
with telemetry.intake(None, None):
    telemetry.describe("wi-probe", 1, "contract-review")
    with telemetry.stage(telemetry.Stage.UPLOAD):
        pass
    telemetry.accepted("contract-review", "reference", 1234)
with telemetry.consuming({}):
    telemetry.settled(DeadLetter(DeadLetterReason.INVALID_ENVELOPE, "not JSON"))
trace.get_tracer_provider().shutdown()
metrics.get_meter_provider().shutdown()
print(first, again)
"""


def test_local_files_hold_the_spans_and_metrics(tmp_path: Path) -> None:
    from scripts.telemetry_files import read_metric_points, read_spans, timeline

    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["files", "files"]  # configured once; later calls keep it
    rows = timeline(read_spans(tmp_path), "wi-probe")
    assert [(row.depth, row.span.name) for row in rows] == [(0, "claimcheck intake"), (1, "intake upload")]
    points = {
        (point.name, frozenset(point.attributes.items())): point for point in read_metric_points(tmp_path)
    }
    reason = frozenset({("claimcheck.dead_letter_reason", "invalid_envelope")})
    assert points[("claimcheck.documents.dead_lettered", reason)].value == 1
    intake = frozenset({("claimcheck.purpose", "contract-review"), ("claimcheck.transport", "reference")})
    size = points[("claimcheck.payload.size", intake)]
    assert (size.count, size.value) == (1, 1234)


def test_nothing_configured_without_a_target() -> None:
    probe = "from claimcheck.adapters import telemetry_setup; print(telemetry_setup.configure({}))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "none"


# --- bounded local files ---------------------------------------------------------------------------------


def test_rotating_lines_keep_whole_lines_and_only_the_newest_two_files(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    stream = RotatingLines(path, max_bytes=1000)
    lines = [f'{{"n":{n:04d},"pad":"{"x" * 80}"}}\n' for n in range(100)]  # 100 bytes each
    for line in lines:
        stream.write(line)
    stream.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.jsonl", "spans.jsonl.1"]
    current, previous = path.read_text().splitlines(True), rotated(path).read_text().splitlines(True)
    assert path.stat().st_size <= 1000
    assert rotated(path).stat().st_size <= 1000
    # The newest lines, whole and in order, with no gap between the two files.
    assert previous + current == lines[-len(previous + current) :]
    assert len(previous + current) >= 10


def test_a_line_longer_than_the_limit_is_kept_and_keeps_the_lines_before_it(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    stream = RotatingLines(path, max_bytes=100)
    for line in ("first\n", "x" * 300 + "\n", "y" * 300 + "\n"):
        stream.write(line)
    stream.close()
    assert (rotated(path).read_text(), path.read_text()) == ("x" * 300 + "\n", "y" * 300 + "\n")
    fresh = tmp_path / "fresh.jsonl"
    stream = RotatingLines(fresh, max_bytes=100)
    stream.write("z" * 300 + "\n")  # the first line of an empty file: no rotation of nothing
    stream.close()
    assert not rotated(fresh).exists()


def test_a_bad_file_limit_is_refused_naming_the_setting() -> None:
    assert file_max_bytes({}) == DEFAULT_FILE_MAX_BYTES
    assert file_max_bytes({FILE_MAX_BYTES_SETTING: "4096"}) == 4096
    for bad in ("0", "-1", "4k", " "):
        with pytest.raises(SettingsError, match=FILE_MAX_BYTES_SETTING):
            file_max_bytes({FILE_MAX_BYTES_SETTING: bad})


def _span_line(work_item_id: str, name: str, span_id: str, start: int) -> str:
    span = {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
        "attributes": [{"key": WORK_ITEM_ID, "value": {"stringValue": work_item_id}}],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n"


def test_trace_reads_a_journey_split_across_the_rotated_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The intake went to spans.jsonl.1 before the rotation, the delivery to spans.jsonl after it:
    `claimcheck-ops trace` still prints both, in order, each once."""
    from scripts.ops import main as ops_main

    rotated(tmp_path / SPANS_FILE).write_text(_span_line("wi-split", INTAKE_SPAN, "01" * 8, 1_000))
    (tmp_path / SPANS_FILE).write_text(_span_line("wi-split", CONSUME_SPAN, "02" * 8, 2_000_000))
    assert ops_main(["trace", "wi-split", "--telemetry-dir", str(tmp_path), "--json"]) == 0
    assert [entry["name"] for entry in json.loads(capsys.readouterr().out)] == [INTAKE_SPAN, CONSUME_SPAN]


_ROTATION_PROBE = """
import sys
from pathlib import Path
from claimcheck import telemetry
from claimcheck.adapters import telemetry_setup
from opentelemetry import trace

directory = Path(sys.argv[1])
telemetry_setup.configure({"CLAIMCHECK_TELEMETRY_DIR": str(directory), sys.argv[2]: sys.argv[3]})
for n in range(200):
    with telemetry.intake(None, None):
        telemetry.describe(f"wi-{n}", 1, "contract-review")
        with telemetry.stage(telemetry.Stage.UPLOAD):
            pass
    trace.get_tracer_provider().force_flush()
trace.get_tracer_provider().shutdown()
"""


def test_the_configured_span_file_stays_bounded_and_keeps_the_newest_documents(tmp_path: Path) -> None:
    """The real exporter set up as the host does, with 8 KiB files: 200 documents' spans leave at most
    two files of about that size, holding the last documents' whole journeys, not the first ones'."""
    limit = 8 * 1024
    subprocess.run(
        [sys.executable, "-c", _ROTATION_PROBE, str(tmp_path), FILE_MAX_BYTES_SETTING, str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(SPANS_FILE))
    assert files == [SPANS_FILE, rotated(tmp_path / SPANS_FILE).name]
    assert all((tmp_path / name).stat().st_size <= limit for name in files)
    spans = read_spans(tmp_path)
    assert [row.span.name for row in timeline(spans, "wi-199")] == [INTAKE_SPAN, "intake upload"]
    assert timeline(spans, "wi-0") == []


def test_each_instance_writes_files_of_its_own_and_the_readers_read_them_all(tmp_path: Path) -> None:
    """Instances sharing one rotating file would rename it under each other: each process that knows
    its instance gets its own file name, and the trace reads every instance's files."""
    assert instance_file(SPANS_FILE, {}) == SPANS_FILE
    first = instance_file(SPANS_FILE, {"WEBSITE_INSTANCE_ID": "local-instance-0"})
    second = instance_file(SPANS_FILE, {"WEBSITE_INSTANCE_ID": "local-instance-1"})
    assert (first, second) == ("spans.local-instance-0.jsonl", "spans.local-instance-1.jsonl")
    assert instance_file(SPANS_FILE, {"WEBSITE_INSTANCE_ID": "../x y"}) == "spans.xy.jsonl"
    (tmp_path / first).write_text(_span_line("wi-both", INTAKE_SPAN, "01" * 8, 1_000))
    rotated(tmp_path / second).write_text(_span_line("wi-both", CONSUME_SPAN, "02" * 8, 2_000_000))
    (tmp_path / second).write_text(_span_line("wi-both", CONSUME_SPAN, "03" * 8, 3_000_000))
    assert telemetry_files(tmp_path, SPANS_FILE) == [tmp_path / first, tmp_path / second]
    assert sorted(span.span_id for span in read_spans(tmp_path)) == ["01" * 8, "02" * 8, "03" * 8]
