"""The embedded Service Bus emulator (`python -m local.servicebus`) as the ops CLI tests run it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from local.servicebus import start_emulator_process

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


@contextmanager
def running_emulator(workdir: Path) -> Iterator[tuple[str, Path]]:
    """Yield (connection string, Config.json path) of a fresh in-memory emulator subprocess."""
    config_path = workdir / "Config.json"
    config_path.write_text(json.dumps(CONFIG, indent=2), encoding="utf-8")
    with start_emulator_process(config_path) as emulator:
        yield emulator.connection_string, config_path
