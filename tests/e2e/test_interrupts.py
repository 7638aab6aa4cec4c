"""Ctrl-C (SIGINT to the real process) at several points of `python -m local.stack`, `make demo`'s
`python -m scripts.demo` and `claimcheck-ops`: one closing line, exit code 130, no traceback, and
nothing left running (no Azurite, emulator, issuer or host process outlives the interrupted one).

Every wait is bounded: a line within 120 s, an exit within 90 s."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from local.running import read_running_stack
from local.stack import REPO_ROOT

INTERRUPTED = 130
LINE_TIMEOUT = 120.0
EXIT_TIMEOUT = 90.0


class Running:
    """A child process whose merged output is read line by line in the background."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ | (env or {}),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, pattern: str) -> str:
        deadline = time.monotonic() + LINE_TIMEOUT
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def interrupt(self) -> tuple[int, list[str]]:
        """SIGINT, then the exit code and every line printed (the ones already seen included)."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=EXIT_TIMEOUT)
        time.sleep(0.2)  # the reader thread's last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code, [line.rstrip("\n") for line in self.seen]

    def descendants(self) -> list[psutil.Process]:
        children: list[psutil.Process] = psutil.Process(self.process.pid).children(recursive=True)
        return children

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=EXIT_TIMEOUT)


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for process in started:
        process.kill()


def _assert_clean_end(
    code: int, lines: list[str], last: str, children: list[psutil.Process], expected: int = INTERRUPTED
) -> None:
    assert code == expected, lines
    assert lines[-1].startswith(last), lines
    assert not any("Traceback" in line for line in lines), lines
    _, alive = psutil.wait_procs(children, timeout=30)
    assert alive == [], [child.cmdline() for child in alive]


def _stack(data: Path) -> list[str]:
    return [
        sys.executable, "-m", "local.stack", "--port", "0", "--servicebus-port", "0", "--issuer-port", "0",
        "--data", str(data),
    ]  # fmt: skip


@pytest.mark.parametrize("point", ["starting the Service Bus emulator", "starting the Functions host"])
def test_ctrl_c_while_the_stack_starts(tmp_path: Path, running: list[Running], point: str) -> None:
    launcher = Running(_stack(tmp_path))
    running.append(launcher)
    launcher.wait_for(re.escape(point))
    children = launcher.descendants()
    assert children  # Azurite at least
    code, lines = launcher.interrupt()
    _assert_clean_end(code, lines, "interrupted; stack stopped", children)


def test_ctrl_c_while_the_stack_loads_its_modules(tmp_path: Path, running: list[Running]) -> None:
    """Right after the start, while Python imports the SDKs (or, on a fast machine, already starting
    Azurite): still one line and 130, never an import traceback."""
    launcher = Running(_stack(tmp_path))
    running.append(launcher)
    time.sleep(0.3)
    code, lines = launcher.interrupt()
    _assert_clean_end(code, lines, "interrupted", [])


def test_ctrl_c_while_the_stack_serves(tmp_path: Path, running: list[Running]) -> None:
    launcher = Running(_stack(tmp_path))
    running.append(launcher)
    launcher.wait_for(r"Press Ctrl-C")
    children = launcher.descendants()
    assert len(children) >= 4
    # Where claimcheck-ops finds it while it serves (scripts/ops_local.py), gone once it stopped.
    assert read_running_stack(tmp_path) is not None
    code, lines = launcher.interrupt()
    _assert_clean_end(code, lines, "interrupted; stack stopped in ", children)
    assert read_running_stack(tmp_path) is None


@pytest.mark.parametrize(
    ("point", "make"),
    [
        (r"starting the Service Bus emulator", False),  # while the stack starts
        (r" intake ", True),  # mid-journey (the first document was sent), as `make demo` runs it
    ],
)
def test_ctrl_c_in_the_demo(running: list[Running], point: str, make: bool) -> None:
    """Run directly, exit 130; as `make demo` runs it, exit 0, so that make (which the same Ctrl-C
    ends, the shell seeing 130) adds no "*** Interrupt" line after the demo's own."""
    under_make = ["--exit-code-on-interrupt", "0"] if make else []
    demo = Running([sys.executable, "-m", "scripts.demo", *under_make])
    running.append(demo)
    demo.wait_for(point)
    children = demo.descendants()
    assert children
    code, lines = demo.interrupt()
    _assert_clean_end(code, lines, "interrupted; stack stopped", children, 0 if make else INTERRUPTED)


def test_ctrl_c_in_the_agent_demo_while_the_agent_works(running: list[Running]) -> None:
    """`make demo-agent`: the scripted agent mid-run (claimcheck-mcp a child of it) stops as cleanly."""
    agent = Running([sys.executable, "-m", "scripts.demo_agent"])
    running.append(agent)
    agent.wait_for(r"the agent runs claimcheck-mcp")
    time.sleep(2)  # the MCP server started and the first tool calls are under way
    children = agent.descendants()
    code, lines = agent.interrupt()
    _assert_clean_end(code, lines, "interrupted; stack stopped", children)


# ---------------------------------------------------------------------------------------------- ops


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback HTTP URL whose server accepts connections and requests, and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for connection in accepted:
        connection.close()
    listener.close()


def _ops(*args: str) -> list[str]:
    return [sys.executable, "-m", "scripts.ops", *args]


def _send(tmp_path: Path, api: str) -> list[str]:
    document = tmp_path / "contract.txt"
    document.write_text("The Supplier shall deliver the goods by 2026-01-31.\n")
    return _ops(
        "send", str(document), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal", "--api", api,
    )  # fmt: skip


# Imports scripts.ops with a Ctrl-C delivered while it imports scripts.ops_api (its own imports).
_INTERRUPTED_IMPORT = """
import builtins, os, signal, sys, time
real_import = builtins.__import__
def importing(name, *args, **kwargs):
    if name == "scripts.ops_api":
        print("importing", flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    return real_import(name, *args, **kwargs)
builtins.__import__ = importing
from scripts.ops import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_claimcheck_ops_loads() -> None:
    loading = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT, "--help"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=EXIT_TIMEOUT, check=False,
    )  # fmt: skip
    assert loading.stdout.strip() == "importing"
    assert (loading.returncode, loading.stderr.strip()) == (INTERRUPTED, "interrupted")


def test_ctrl_c_while_send_waits_for_its_token(tmp_path: Path, silent_server: str) -> None:
    """The issuer never answers: nothing was sent, and the line says so."""
    command = [*_send(tmp_path, "http://127.0.0.1:9/api"), "--token-issuer", f"{silent_server}/tenant/v2.0"]
    sending = Running(command)
    time.sleep(3)  # past the imports: waiting on the issuer
    code, lines = sending.interrupt()
    assert code == INTERRUPTED, lines
    assert lines == ["interrupted; the document was not accepted: nothing was sent"]


def test_ctrl_c_while_send_waits_for_the_api(tmp_path: Path, silent_server: str) -> None:
    """The POST went out and no answer came: the line gives the idempotency key to resend with."""
    from local.identity import SigningKey, TokenMinter
    from local.identity.server import make_server
    from local.ports import free_port

    port = free_port()
    minter = TokenMinter(SigningKey.generate(), base_url=f"http://127.0.0.1:{port}")
    issuer = make_server(minter, port)
    threading.Thread(target=issuer.serve_forever, daemon=True).start()
    try:
        sending = Running([*_send(tmp_path, f"{silent_server}/api"), "--token-issuer", minter.issuer])
        time.sleep(4)  # imports, the token, then the POST that is never answered
        code, lines = sending.interrupt()
    finally:
        issuer.shutdown()
        issuer.server_close()
    assert code == INTERRUPTED, lines
    (line,) = lines
    assert re.fullmatch(
        r"interrupted; the document was not accepted, or was and its receipt was not read: send it "
        r"again with --idempotency-key [0-9a-f]{32} \(answers the first receipt, writes nothing twice\)",
        line,
    ), line


def test_ctrl_c_while_a_bus_command_waits(silent_server: str) -> None:
    """A broker that accepts the connection and never speaks AMQP: `interrupted`, 130."""
    port = silent_server.rsplit(":", 1)[1]
    connection = (
        f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )
    listing = Running(_ops("dlq", "list", "documents"), env={"CLAIMCHECK_SERVICEBUS_CONNECTION": connection})
    time.sleep(4)
    code, lines = listing.interrupt()
    assert (code, lines) == (INTERRUPTED, ["interrupted"])
