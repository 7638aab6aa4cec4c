"""`python -m local.stack` serves until Ctrl-C, then stops every process it started; it refuses a taken
port and does not outlive a dead component."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests
from azure.storage.blob import BlobServiceClient

from local.functions_host.instances import configured_instance_count
from local.identity.client import local_token
from local.stack import REPO_ROOT, start_stack


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


def _wait_for(lines: queue.Queue[str], pattern: str, timeout: float = 90.0) -> str:
    while True:
        line = lines.get(timeout=timeout)
        if re.search(pattern, line):
            return line


def _command(data: Path, *ports: str) -> list[str]:
    """The launcher on free ports unless `ports` says otherwise (a later flag wins in argparse)."""
    return [
        sys.executable,
        "-m",
        "local.stack",
        "--port",
        "0",
        "--servicebus-port",
        "0",
        "--issuer-port",
        "0",
        *ports,
        "--data",
        str(data),
    ]


def _launch(data: Path) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    launcher = subprocess.Popen(
        _command(data), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(launcher.stdout, lines), daemon=True).start()
    return launcher, lines


def test_ctrl_c_stops_azurite_emulator_issuer_and_host(tmp_path: Path) -> None:
    """The launcher prints its endpoints, serves the API (to a caller with a token from the printed
    issuer only), and on SIGINT exits 130 (as a Ctrl-C'd program does) leaving no child behind."""
    launcher, lines = _launch(tmp_path)
    try:
        api = _wait_for(lines, r"Functions API").split()[2]
        issuer_line = _wait_for(lines, r"Token issuer").split()
        issuer, audience = issuer_line[2], issuer_line[4].rstrip(")")
        _wait_for(lines, r"Press Ctrl-C")
        children = psutil.Process(launcher.pid).children(recursive=True)
        assert len(children) >= 4
        assert requests.get(f"{api}/work-items/wi-none", timeout=30).status_code == 401
        bearer = {"Authorization": f"Bearer {local_token(issuer, 'local-producer', audience)}"}
        assert requests.get(f"{api}/work-items/wi-none", headers=bearer, timeout=30).status_code == 404
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=90) == 130
    finally:
        if launcher.poll() is None:
            launcher.kill()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def test_killed_launcher_leaves_no_azurite_emulator_issuer_or_host(tmp_path: Path) -> None:
    """Even a SIGKILLed launcher takes Azurite, the emulator, the issuer and the host down with it."""
    launcher, lines = _launch(tmp_path)
    try:
        _wait_for(lines, r"Press Ctrl-C")
        children = psutil.Process(launcher.pid).children(recursive=True)
        names = sorted(child.name() for child in children)
        # The emulator, the token issuer, the host and (above one) its instances.
        instances = configured_instance_count()
        expected = 3 + (instances if instances > 1 else 0)
        assert sum("python" in name for name in names) == expected, names
        assert "node" in names, names
    finally:  # a failed check above must not leave the stack running
        launcher.kill()
        launcher.wait(timeout=30)
    try:
        _, alive = psutil.wait_procs(children, timeout=30)
        assert alive == []
    finally:
        for leftover in children:
            if leftover.is_running():
                leftover.kill()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port on which something else (this socket) already listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


@pytest.mark.parametrize("flag", ["--port", "--servicebus-port", "--issuer-port"])
def test_a_taken_port_is_refused_naming_it(tmp_path: Path, taken_port: int, flag: str) -> None:
    """Another listener on the host or emulator port: one error line naming the port and the flag, exit 1,
    and no "ready" (before, the other listener answered the readiness probe while our child died)."""
    launcher = subprocess.run(
        _command(tmp_path, flag, str(taken_port)),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    output = launcher.stdout + launcher.stderr
    assert launcher.returncode == 1, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert f"port {taken_port} " in errors[0]
    assert "already in use" in errors[0]
    assert flag in errors[0]
    assert "Press Ctrl-C" not in output
    assert "Traceback" not in output


def test_a_component_that_dies_stops_the_stack_with_an_error(tmp_path: Path) -> None:
    """A SIGKILLed Functions host is noticed: the launcher names it, stops the rest and exits 1."""
    launcher, lines = _launch(tmp_path)
    try:
        _wait_for(lines, r"Press Ctrl-C")
        children = psutil.Process(launcher.pid).children(recursive=True)
        hosts = [child for child in children if "local.functions_host" in child.cmdline()]
        # With several instances (local.functions_host.instances) one of them crashes: the host dies
        # the same way, and the launcher reports it as it would a single host's crash.
        instances = [child for child in hosts if child.ppid() in {host.pid for host in hosts}]
        assert len(hosts) == 1 + len(instances)
        (instances or hosts)[0].kill()
        error = _wait_for(lines, r"^error:")
        assert launcher.wait(timeout=90) == 1
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert error.startswith("error: the Functions host was killed by signal 9; see ")
    assert "functions-host.log" in error
    _, alive = psutil.wait_procs(children, timeout=30)
    assert alive == []


def test_components_can_be_killed_and_started_again_in_place(tmp_path: Path) -> None:
    """The helpers the chaos run uses: a killed component is not reported as a crash, comes back on
    the same ports with the same data, and a crash the stack did not cause is reported."""
    with start_stack(work_dir=tmp_path) as stack:
        storage = stack.storage_connection_string
        BlobServiceClient.from_connection_string(storage).create_container("kept")
        stack.restart("azurite")  # a clean stop flushes, so the container survives
        stack.kill("emulator")
        assert stack.exited() == []
        stack.start("emulator")
        assert stack.storage_connection_string == storage
        assert BlobServiceClient.from_connection_string(storage).get_container_client("kept").exists()

        assert stack.host.process is not None
        os.killpg(stack.host.process.pid, signal.SIGKILL)
        stack.host.process.wait(timeout=30)
        (crashed,) = stack.exited()
        assert (crashed.name, crashed.exit_code) == ("host", -signal.SIGKILL)

        stack.restart("host")
        assert stack.exited() == []
        answer = requests.get(f"{stack.api_url}/work-items/wi-none", headers=stack.auth_headers(), timeout=30)
        assert answer.status_code == 404
