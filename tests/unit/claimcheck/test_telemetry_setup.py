"""claimcheck.adapters.telemetry_setup: which exporter the app settings choose, the Entra identity for Azure
Monitor, and the local JSON-lines files (in a child process: the SDK's global providers are set once)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claimcheck.adapters import telemetry_setup
from claimcheck.adapters.telemetry_setup import AzureMonitorTarget, azure_monitor_target
from claimcheck.settings import SettingsError

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
