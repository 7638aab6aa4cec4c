"""Start the embedded Service Bus emulator (`python -m local.servicebus`) for the ops CLI tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from local.ports import free_port, wait_for_port

REPO_ROOT = Path(__file__).resolve().parents[3]

_SUBSCRIPTION = {
    "DeadLetteringOnMessageExpiration": True,
    "DefaultMessageTimeToLive": "PT1H",
    "LockDuration": "PT1M",
    "MaxDeliveryCount": 5,
    "ForwardDeadLetteredMessagesTo": "",
    "ForwardTo": "",
    "RequiresSession": False,
}

# The brief's small topology: a session queue with duplicate detection, and a topic whose `audit`
# subscription takes everything ($Default) while `replays` takes only lane = 'replays', so the
# replay-all test owns that subscription. The duplicate window outlasts any one test.
CONFIG: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {
                        "Name": "documents",
                        "Properties": {
                            "DeadLetteringOnMessageExpiration": True,
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT5M",
                            "ForwardDeadLetteredMessagesTo": "",
                            "ForwardTo": "",
                            "LockDuration": "PT1M",
                            "MaxDeliveryCount": 5,
                            "RequiresDuplicateDetection": True,
                            "RequiresSession": True,
                        },
                    }
                ],
                "Topics": [
                    {
                        "Name": "results",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT5M",
                            "RequiresDuplicateDetection": True,
                        },
                        "Subscriptions": [
                            {"Name": "audit", "Properties": dict(_SUBSCRIPTION)},
                            {
                                "Name": "replays",
                                "Properties": dict(_SUBSCRIPTION),
                                "Rules": [
                                    {
                                        "Name": "replay-lane",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {"Properties": {"lane": "replays"}},
                                        },
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def connection_string(port: int) -> str:
    return (
        f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )


@contextmanager
def running_emulator(workdir: Path) -> Iterator[tuple[str, Path]]:
    """Yield (connection string, Config.json path) of a fresh in-memory emulator; stop it afterwards."""
    config_path = workdir / "Config.json"
    config_path.write_text(json.dumps(CONFIG, indent=2), encoding="utf-8")
    port = free_port()
    log = (workdir / "emulator.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "local.servicebus",
            "--config",
            str(config_path),
            "--port",
            str(port),
            "--in-memory",
        ],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, timeout=30)
        yield connection_string(port), config_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        log.close()
