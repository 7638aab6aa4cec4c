"""The host scaled out: ``python -m local.functions_host --instances 2`` against the emulator and Azurite.

Two host processes run the sample app: both serve the one HTTP port, both take Service Bus sessions
(each message handled once), and the every-second timer fires once per occurrence, in the instance
holding its listener lease in Azurite, not once per instance. When one instance dies, the host dies
the same way (the stack then sees a dead host, not half of one).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from local.azurite import start_azurite
from local.functions_host.instances import (
    INSTANCE_INDEX_ENV,
    INSTANCES_SETTING,
    InstanceCountRefused,
    configured_instance_count,
    parse_instance_count,
)
from local.ports import free_port

from .conftest import SAMPLE_APP

BOTH = {"local-instance-0", "local-instance-1"}
READY_TIMEOUT_SECONDS = 180.0


@pytest.mark.parametrize("text", ["0", "9", "two", " ", "1.5"])
def test_an_instance_count_out_of_range_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(InstanceCountRefused, match=f"{INSTANCES_SETTING} must be a whole number from 1 to 8"):
        configured_instance_count({INSTANCES_SETTING: text})


def test_the_instance_count_defaults_to_two_and_reads_the_setting() -> None:
    assert configured_instance_count({}) == 2
    assert configured_instance_count({INSTANCES_SETTING: "3"}) == 3
    with pytest.raises(InstanceCountRefused, match="--instances must be"):
        parse_instance_count("0", source="--instances")


@dataclass
class ScaledHost:
    process: subprocess.Popen[bytes]
    port: int
    journals: dict[str, Path]
    connection: str

    def instance_pids(self) -> list[int]:
        children = psutil.Process(self.process.pid).children()
        return [c.pid for c in sorted(children, key=lambda c: int(c.environ()[INSTANCE_INDEX_ENV]))]


@pytest.fixture(scope="module")
def scaled(servicebus: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaledHost]:
    folder = tmp_path_factory.mktemp("scaled-host")
    journals = {"timer": folder / "timer.jsonl", "bus": folder / "bus.jsonl"}
    azurite = start_azurite(folder / "azurite")
    port = free_port()
    env = {
        **os.environ,
        "SampleServiceBus": servicebus,
        "AzureWebJobsStorage": azurite.connection_string,
        "SAMPLE_TIMER_JOURNAL": str(journals["timer"]),
        "SAMPLE_BUS_JOURNAL": str(journals["bus"]),
    }
    log_path = folder / "host.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "local.functions_host",
                    "--app",
                    str(SAMPLE_APP),
                    "--port",
                    str(port),
                ),
                *("--instances", "2", "--functions", "instance", "tick", "orders"),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while b"Functions host ready on" not in log_path.read_bytes():
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        yield ScaledHost(process, port, journals, servicebus)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
        azurite.stop(flush=False)
        print(log_path.read_text()[-3000:])


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_http_port_is_served_by_every_instance(scaled: ScaledHost) -> None:
    seen: Counter[str] = Counter()
    # A new connection per request: the kernel spreads connections (not requests) over the instances.
    for _ in range(200):
        seen[requests.get(f"http://127.0.0.1:{scaled.port}/api/instance", timeout=30).json()["instance"]] += 1
        if set(seen) == BOTH and min(seen.values()) >= 3:
            break
    assert set(seen) == BOTH, seen


def test_sessions_spread_over_the_instances_and_each_message_is_handled_once(scaled: ScaledHost) -> None:
    sent: list[str] = []
    with (
        ServiceBusClient.from_connection_string(scaled.connection) as client,
        client.get_queue_sender("orders") as sender,
    ):
        # Waves of 20 one-message sessions until both instances took some (bounded).
        for _ in range(5):
            wave = [f"scale-{uuid.uuid4().hex[:10]}" for _ in range(20)]
            sender.send_messages([ServiceBusMessage(body, session_id=body) for body in wave])
            sent += wave
            deadline = time.monotonic() + 120
            while len(_lines(scaled.journals["bus"])) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.2)
            if {line.get("instance") for line in _lines(scaled.journals["bus"])} == BOTH:
                break
    time.sleep(1.0)  # a second handling would show up right behind the first
    lines = _lines(scaled.journals["bus"])
    handled = Counter(str(line["body"]) for line in lines)
    assert handled == Counter(sent), "every message handled exactly once"
    by_instance = Counter(str(line.get("instance")) for line in lines)
    assert set(by_instance) == BOTH, by_instance


def test_a_timer_fires_once_per_occurrence_not_once_per_instance(scaled: ScaledHost) -> None:
    """The sample's timer fires every second; both instances run it, only the lease holder fires."""
    time.sleep(4.0)
    lines = _lines(scaled.journals["timer"])
    assert len(lines) >= 3
    assert len({line.get("instance") for line in lines}) == 1, "only the lease holder fires"
    times = [float(str(line["at"])) for line in lines]
    # Once a second (an occurrence that runs late is not repeated): at most one more than the seconds
    # the firings span, where one firing per instance would be about twice that.
    assert len(times) <= (times[-1] - times[0]) + 2


def test_when_an_instance_dies_the_host_dies_the_same_way(scaled: ScaledHost) -> None:
    first, second = scaled.instance_pids()
    os.kill(second, signal.SIGKILL)
    assert scaled.process.wait(timeout=60) == -signal.SIGKILL
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
