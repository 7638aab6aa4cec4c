"""Cold start: importing the public API loads no Azure SDK and no PDF library."""

from __future__ import annotations

import subprocess
import sys


def test_importing_claimcheck_loads_no_heavy_sdk() -> None:
    """`import claimcheck` leaves azure.storage, azure.data.tables, azure.servicebus, pypdf and the
    OpenTelemetry SDK unloaded (the core records through the OpenTelemetry API only)."""
    probe = (
        "import sys, claimcheck, claimcheck.testing\n"
        "heavy = ('azure.storage', 'azure.data.tables', 'azure.servicebus', 'azure.identity', 'pypdf',\n"
        "         'opentelemetry.sdk', 'azure.monitor')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
