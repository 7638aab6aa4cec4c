"""The pytest plugin's options, in a pytest run of its own (the plugin as installed here): state
shared by a session when asked, a test's own emulator by marker, a topology dict from an overridden
fixture, and a refused isolation value naming the option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT_TESTS = """
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

PORTS = []


@pytest.fixture(scope="session")
def servicebus_emulator_config():
    return {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "shared"}]}]}}


def test_first_leaves_a_message(servicebus_emulator):
    PORTS.append(servicebus_emulator.port)
    with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
        with client.get_queue_sender("shared") as sender:
            sender.send_messages(ServiceBusMessage("left"))


OWN = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "own"}]}]}}


@pytest.mark.servicebus_emulator(OWN)
def test_a_marked_test_has_its_own(servicebus_emulator):
    assert servicebus_emulator.port not in PORTS
    with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
        with client.get_queue_receiver("own") as receiver:
            assert receiver.peek_messages(max_message_count=5) == []


def test_second_sees_it_in_the_shared_emulator(servicebus_emulator):
    assert servicebus_emulator.port == PORTS[0]
    with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
        with client.get_queue_receiver("shared") as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=5)] == ["left"]
"""


def _pytest(project: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300, check=False)


def test_session_isolation_shares_one_emulator_and_a_marker_gives_a_test_its_own(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nservicebus_emulator_isolation = session\n")
    (tmp_path / "test_shared.py").write_text(PROJECT_TESTS)
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_an_unknown_isolation_is_refused_naming_the_option(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nservicebus_emulator_isolation = module\n")
    (tmp_path / "test_one.py").write_text("def test_one(servicebus_emulator):\n    pass\n")
    done = _pytest(tmp_path)
    assert done.returncode != 0
    assert "servicebus_emulator_isolation = 'module'" in done.stdout + done.stderr
