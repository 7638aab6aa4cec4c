"""The embedded Service Bus emulator (`python -m servicebus_emulator`) as the ops CLI tests run it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from servicebus_emulator import start_process as start_emulator_process

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


def write_config(workdir: Path) -> Path:
    """Write CONFIG as `workdir`/Config.json and return its path."""
    config_path = workdir / "Config.json"
    config_path.write_text(json.dumps(CONFIG, indent=2), encoding="utf-8")
    return config_path


def write_stack_outputs(workdir: Path, *, extra_queues: tuple[str, ...] = ()) -> Path:
    """The entities of CONFIG as `pulumi stack output --json` names them (queues, subscriptions)."""
    (namespace,) = CONFIG["UserConfig"]["Namespaces"]
    outputs = {
        "queues": [queue["Name"] for queue in namespace["Queues"]] + list(extra_queues),
        "subscriptions": {
            topic["Name"]: [sub["Name"] for sub in topic["Subscriptions"]] for topic in namespace["Topics"]
        },
    }
    path = workdir / "stack-outputs.json"
    path.write_text(json.dumps(outputs), encoding="utf-8")
    return path


class OpsEmulator(NamedTuple):
    """A running emulator as the CLI reaches it: AMQP and management connection strings, Config.json,
    SQLite data dir."""

    connection: str
    management: str
    config: Path
    data: Path


@contextmanager
def running_emulator(workdir: Path) -> Iterator[OpsEmulator]:
    """Run a fresh emulator subprocess that keeps its messages in `workdir`/data."""
    config_path = write_config(workdir)
    data_dir = workdir / "data"
    data_dir.mkdir()
    with start_emulator_process(config_path, data_dir=data_dir) as emulator:
        yield OpsEmulator(
            emulator.connection_string, emulator.management_connection_string, config_path, data_dir
        )
