"""Fixtures for the local Functions host tests: the sample app and its journals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from servicebus_emulator import start_process as start_emulator_process

SAMPLE_APP = Path(__file__).parent / "sample_app" / "function_app.py"


@pytest.fixture
def journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Files where the sample app's functions record what they saw (passed as app settings)."""
    paths = {"timer": tmp_path / "timer.jsonl", "bus": tmp_path / "bus.jsonl"}
    monkeypatch.setenv("SAMPLE_TIMER_JOURNAL", str(paths["timer"]))
    monkeypatch.setenv("SAMPLE_BUS_JOURNAL", str(paths["bus"]))
    return paths


def _sample_topology() -> dict[str, object]:
    """Config.json (interface A) for the sample app: a session queue and a topic with one subscription."""
    entity = {
        "DefaultMessageTimeToLive": "PT1H",
        "LockDuration": "PT5S",
        "MaxDeliveryCount": 5,
        "DeadLetteringOnMessageExpiration": True,
        "ForwardTo": "",
        "ForwardDeadLetteredMessagesTo": "",
    }
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        {
                            "Name": name,
                            "Properties": {
                                **entity,
                                "RequiresSession": True,
                                "RequiresDuplicateDetection": False,
                                "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            },
                        }
                        for name in ("orders", "settlements")
                    ],
                    "Topics": [
                        {
                            "Name": "events",
                            "Properties": {
                                "DefaultMessageTimeToLive": "PT1H",
                                "RequiresDuplicateDetection": False,
                                "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            },
                            "Subscriptions": [
                                {"Name": "all", "Properties": {**entity, "RequiresSession": False}}
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }


@pytest.fixture(scope="module")
def servicebus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded emulator (its command-line entry point) loaded with the sample topology; yields its
    connection string."""
    folder = tmp_path_factory.mktemp("servicebus")
    config = folder / "Config.json"
    config.write_text(json.dumps(_sample_topology()))
    with start_emulator_process(config) as emulator:
        yield emulator.connection_string
