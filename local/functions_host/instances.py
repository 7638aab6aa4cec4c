"""Scale out: run the Function App as N host instances, as Flex Consumption does on Azure.

One Python process is bound by its GIL to one core, whatever ``maxConcurrentSessions`` says; Azure
scales an app out to more instances instead, and so does the local host. ``python -m local.functions_host
--instances N`` starts a small supervisor that runs N ordinary host processes (``--instance i``), each
loading the app on its own:

- each instance binds its own HTTP server to the same port with ``SO_REUSEPORT``: the kernel spreads
  incoming connections over them, as Azure's front end spreads requests over instances;
- each instance runs its own Service Bus listeners, which compete for sessions through the broker
  (a session is held by one receiver at a time, so per-session FIFO holds whatever the count);
- timer triggers run in one instance at a time: the one holding the function's listener lock, a blob
  lease in ``AzureWebJobsStorage`` (``listener_lock.py``), as the real host's singleton lock does.

Each instance logs to the supervisor's output with ``[instance i]`` in every line, and is told who it
is as Azure tells an app: ``WEBSITE_INSTANCE_ID``, and the OpenTelemetry resource attribute
``service.instance.id`` (so each span says which instance recorded it).

The supervisor says "ready" once every instance serves. It is not a restarter: when an instance dies
on its own it stops the others and exits the same way (killed by the same signal, or the same exit
code), so the launcher above it sees a dead host rather than half of one.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

from claimcheck.telemetry_settings import INSTANCE_ID_SETTING

from local.processes import die_with_parent

logger = logging.getLogger(__name__)

# The one name of the instance count (an environment variable: the local stack, the demo and the bench
# read it when no count is passed explicitly).
INSTANCES_SETTING = "LOCAL_FUNCTIONS_HOST_INSTANCES"
# Two: the reference machine has two cores, and one instance is bound to one of them by its GIL.
DEFAULT_INSTANCES = 2
MAX_INSTANCES = 8

# Set by the supervisor in each instance's environment.
INSTANCE_INDEX_ENV = "LOCAL_FUNCTIONS_HOST_INSTANCE"
READY_FD_ENV = "LOCAL_FUNCTIONS_HOST_READY_FD"
INSTANCE_ID_ENV = INSTANCE_ID_SETTING  # Azure's name for "the instance this code runs on"
_OTEL_RESOURCE_ENV = "OTEL_RESOURCE_ATTRIBUTES"

# How long instances may take to load the app and start their triggers.
READY_TIMEOUT_SECONDS = 120.0
# How long stopping instances may settle in-flight work before they are killed.
STOP_GRACE_SECONDS = 40.0


class InstanceCountRefused(ValueError):
    """An instance count out of range; the message names where it came from."""


def parse_instance_count(text: str, *, source: str = INSTANCES_SETTING) -> int:
    """``text`` as an instance count from 1 to ``MAX_INSTANCES``; refused naming ``source`` otherwise."""
    try:
        count = int(text.strip())
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_INSTANCES:
        raise InstanceCountRefused(
            f"{source} must be a whole number from 1 to {MAX_INSTANCES} (host instances), got {text!r}"
        )
    return count


def configured_instance_count(env: Mapping[str, str] = os.environ) -> int:
    """``LOCAL_FUNCTIONS_HOST_INSTANCES`` if set, else ``DEFAULT_INSTANCES``."""
    text = env.get(INSTANCES_SETTING)
    return DEFAULT_INSTANCES if text is None or text == "" else parse_instance_count(text)


def instance_id(index: int) -> str:
    return f"local-instance-{index}"


def instance_index(env: Mapping[str, str] = os.environ) -> int | None:
    """This process's index when a supervisor started it as one of several instances, else None."""
    text = env.get(INSTANCE_INDEX_ENV)
    return None if text is None else int(text)


def report_ready(env: Mapping[str, str] = os.environ) -> None:
    """Tell the supervisor (if any) that this instance serves: its index on the ready pipe."""
    fd, index = env.get(READY_FD_ENV), instance_index(env)
    if fd is not None and index is not None:
        os.write(int(fd), f"{index}\n".encode())
        os.close(int(fd))


def _instance_env(index: int, ready_fd: int) -> dict[str, str]:
    env = dict(os.environ)
    resource = f"service.instance.id={instance_id(index)}"
    inherited = env.get(_OTEL_RESOURCE_ENV)
    env.update(
        {
            INSTANCE_INDEX_ENV: str(index),
            READY_FD_ENV: str(ready_fd),
            INSTANCE_ID_ENV: instance_id(index),
            _OTEL_RESOURCE_ENV: f"{inherited},{resource}" if inherited else resource,
        }
    )
    return env


def reserve_port(bind: str) -> socket.socket:
    """A bound, never-listening ``SO_REUSEPORT`` socket on a free port: the instances join it, and
    nothing else can take the port while the supervisor lives."""
    reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reservation.bind((bind, 0))
    return reservation


class Supervisor:
    """Runs ``count`` instances of ``python -m local.functions_host <instance_args> --instance i``."""

    def __init__(self, count: int, instance_args: Sequence[str]) -> None:
        self.count = count
        self.instance_args = list(instance_args)
        self.children: list[subprocess.Popen[bytes]] = []
        self.stop_requested = threading.Event()

    def start(self) -> None:
        """Start every instance and wait until each has said it serves (or raise, having stopped them)."""
        read_fd, write_fd = os.pipe()
        try:
            for index in range(self.count):
                self.children.append(
                    subprocess.Popen(  # noqa: S603 - our own module
                        [
                            sys.executable,
                            "-m",
                            "local.functions_host",
                            *self.instance_args,
                            "--instances",
                            "1",
                        ],
                        env=_instance_env(index, write_fd),
                        pass_fds=(write_fd,),
                        preexec_fn=die_with_parent(signal.SIGTERM),
                    )
                )
            os.close(write_fd)
            write_fd = -1
            self._wait_ready(read_fd)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)

    def _wait_ready(self, read_fd: int) -> None:
        ready: set[int] = set()
        pending = b""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while len(ready) < self.count:
            dead = self.exited()
            if dead is not None:
                raise RuntimeError(f"host instance {dead} exited while starting")
            if time.monotonic() > deadline or self.stop_requested.is_set():
                raise RuntimeError(f"host instances not ready after {READY_TIMEOUT_SECONDS:.0f} s")
            readable, _, _ = select.select([read_fd], [], [], 0.2)
            if readable:
                chunk = os.read(read_fd, 64)
                if not chunk and self.exited() is None:
                    time.sleep(0.2)  # every instance closed its end: the next loop sees who exited
                pending += chunk
                *lines, pending = pending.split(b"\n")
                ready.update(int(line) for line in lines if line.strip())

    def exited(self) -> int | None:
        """The index of an instance that has exited, if any."""
        for index, child in enumerate(self.children):
            if child.poll() is not None:
                return index
        return None

    def serve(self) -> int:
        """Until a stop is requested (0) or an instance exits on its own (its exit status, passed on)."""
        while not self.stop_requested.wait(0.2):
            dead = self.exited()
            if dead is not None:
                code = self.children[dead].returncode
                how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
                logger.error("host instance %d %s; stopping the other instances", dead, how)
                self.stop()
                return code
        self.stop()
        return 0

    def stop(self) -> None:
        """SIGTERM every instance (each settles its in-flight work), SIGKILL what is left after the grace."""
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def exit_like(code: int) -> int:
    """Exit as an instance did: by the same signal when one killed it, else with its code."""
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code
