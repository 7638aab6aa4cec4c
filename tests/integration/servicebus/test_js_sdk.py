"""The same broker through a second real client: the JavaScript `@azure/service-bus` SDK (pinned in
package.json). Each scenario group is a Node script run as a subprocess against its own emulator;
a failure shows the scenario's JavaScript error and stack."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servicebus_emulator import RunningEmulator

SCRIPTS = Path(__file__).parent / "js"
REPO = Path(__file__).resolve().parents[3]
# Each group's emulator options: "limits" runs with a quota of 2 messages per entity.
GROUPS: dict[str, dict[str, Any]] = {
    "queues": {},
    "sessions": {},
    "topics": {},
    "features": {},
    "limits": {"max_messages_per_entity": 2},
    "admin": {},  # the administration client over HTTPS (NODE_EXTRA_CA_CERTS)
    "large": {"premium": True},  # a 50 MB message on a queue of its own size
}


@pytest.mark.parametrize("group", GROUPS)
def test_javascript_sdk_scenarios(group: str, start: Callable[..., RunningEmulator]) -> None:
    emulator = start(**GROUPS[group])
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (a machine with Node 20; `make deps` installs the SDK)"
    assert (REPO / "node_modules" / "@azure" / "service-bus").is_dir(), "run `make deps` (npm ci)"
    result = subprocess.run(
        [node, str(SCRIPTS / f"{group}.mjs")],
        cwd=REPO,
        env={
            **os.environ,
            "SERVICEBUS_CONNECTION": emulator.connection_string,
            "SERVICEBUS_MANAGEMENT_CONNECTION": emulator.management_connection_string,
            "NODE_EXTRA_CA_CERTS": str(emulator.certificate_path),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"JavaScript SDK scenarios '{group}' failed:\n{report}"
    assert "PASS" in result.stdout, report
    assert "FAIL" not in result.stdout, report
