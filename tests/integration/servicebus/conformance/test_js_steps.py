"""The conformance steps through the JavaScript SDK (steps.mjs), against the same target as the
Python steps: the emulator, or the namespace of SERVICEBUS_CONFORMANCE_CONNECTION_STRING."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.integration.servicebus.conformance.conftest import Target

SCRIPT = Path(__file__).with_name("steps.mjs")
REPO = Path(__file__).resolve().parents[4]


def test_javascript_steps(target: Target) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (a machine with Node 20; `make deps` installs the SDK)"
    environment = {
        **os.environ,
        "SERVICEBUS_CONNECTION": target.connection_string,
        "SERVICEBUS_MANAGEMENT_CONNECTION": target.management_connection_string,
    }
    if target.certificate_path is not None:
        environment["NODE_EXTRA_CA_CERTS"] = target.certificate_path
    done = subprocess.run(
        [node, str(SCRIPT)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"JavaScript conformance steps failed on {target.name}:\n{report}"
    assert "PASS" in done.stdout, report
    assert "FAIL" not in done.stdout, report
