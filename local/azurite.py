"""Start and stop Azurite (Microsoft's Storage emulator, installed from npm) on free loopback ports.

Used by the test session and by the local stack launcher, so both run the same Storage emulator the
same way. Azurite keeps its data in a folder we own; tests pass a throwaway one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from local.ports import ensure_port_free, free_port, wait_for_port
from local.processes import die_with_parent

if TYPE_CHECKING:
    from local.azurite_tls import TlsFiles

REPO_ROOT = Path(__file__).resolve().parent.parent

# Azurite's documented development account. It is public knowledge, not a secret, but we still keep
# it out of logs so that the "no account key in logs" check stays meaningful.
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

# Makes Azurite exit once its services have closed on SIGINT, instead of lingering (see the script).
_EXIT_AFTER_CLOSE = Path(__file__).with_name("azurite_exit_after_close.cjs")
# Bounds on a flushing stop: SIGINT, wait for the exit, then SIGKILL.
_FLUSH_TIMEOUT_SECONDS = 10.0
_EXIT_TIMEOUT_SECONDS = 10.0


class AzuriteNotInstalled(RuntimeError):
    """node_modules/.bin/azurite is missing: run `npm ci` (the Makefile does it)."""


@dataclass
class Azurite:
    """A running Azurite process and the endpoints it serves."""

    blob_port: int
    queue_port: int
    table_port: int
    data_dir: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    owns_data_dir: bool = False
    scheme: str = "http"  # "https" when started with TLS (and OAuth)

    @property
    def blob_endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.blob_port}/{ACCOUNT_NAME}"

    @property
    def queue_endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.queue_port}/{ACCOUNT_NAME}"

    @property
    def table_endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.table_port}/{ACCOUNT_NAME}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol={self.scheme};AccountName={ACCOUNT_NAME};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.blob_endpoint};QueueEndpoint={self.queue_endpoint};"
            f"TableEndpoint={self.table_endpoint};"
        )

    @property
    def ports(self) -> tuple[int, int, int]:
        return (self.blob_port, self.queue_port, self.table_port)

    @property
    def log_path(self) -> Path:
        return self.data_dir / "azurite.log"

    def stop(self, *, flush: bool | None = None) -> None:
        """Stop Azurite and everything it started; remove the data folder if we created it.

        ``flush`` (default: only when the data folder is kept) lets Azurite write its metadata out
        before it exits; without it the process is killed at once."""
        if flush is None:
            flush = not self.owns_data_dir
        if self.process.poll() is None:
            if flush:
                self._flush()
            self.kill()
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL at once, keeping the data folder: a crash, as far as the rest of the stack can tell."""
        if self.process.poll() is None:
            # Azurite runs in its own process group (start_new_session), so one signal reaches all.
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=_EXIT_TIMEOUT_SECONDS)

    def _flush(self) -> None:
        """SIGINT, then wait for the exit: Azurite saves its metadata, and our preload script
        (azurite_exit_after_close.cjs) ends the process once all three services have closed."""
        os.killpg(self.process.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=_FLUSH_TIMEOUT_SECONDS)

    def __enter__(self) -> Azurite:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def azurite_executable() -> Path:
    executable = REPO_ROOT / "node_modules" / ".bin" / "azurite"
    if not executable.exists():
        raise AzuriteNotInstalled(f"{executable} not found: run `npm ci` in {REPO_ROOT}")
    return executable


def start_azurite(
    data_dir: Path | None = None,
    *,
    ports: tuple[int, int, int] | None = None,
    timeout: float = 60.0,
    tls: TlsFiles | None = None,
) -> Azurite:
    """Start Azurite and wait until its blob, queue and table ports all accept connections.

    ``ports`` (blob, queue, table) default to three free loopback ports; pass an earlier instance's
    ``ports`` to start it again where its clients expect it (refused with ``PortInUse`` if taken).
    ``tls``: serve HTTPS with that certificate and accept bearer tokens (``--oauth basic``, which needs
    HTTPS; see local/azurite_tls.py), besides the account key."""
    owns = data_dir is None
    location = Path(tempfile.mkdtemp(prefix="azurite-")) if data_dir is None else data_dir
    location.mkdir(parents=True, exist_ok=True)
    if ports is None:
        blob_port, queue_port, table_port = free_port(), free_port(), free_port()
    else:
        blob_port, queue_port, table_port = ports
        for port, service in zip(ports, ("blob", "queue", "table"), strict=True):
            ensure_port_free(port, f"Azurite {service}")
    command = [
        str(azurite_executable()),
        "--silent",
        "--location",
        str(location),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(blob_port),
        "--queueHost",
        "127.0.0.1",
        "--queuePort",
        str(queue_port),
        "--tableHost",
        "127.0.0.1",
        "--tablePort",
        str(table_port),
        # The SDKs we pin may speak a newer API version than this Azurite build knows.
        "--skipApiVersionCheck",
        "--disableProductStyleUrl",
        # Azurite collects usage telemetry by default: a local stack sends nothing out unasked.
        "--disableTelemetry",
    ]
    if tls is not None:
        command += ["--cert", str(tls.certificate), "--key", str(tls.private_key), "--oauth", "basic"]
    log = open(location / "azurite.log", "ab")  # noqa: SIM115 - handed to the child process
    process = subprocess.Popen(  # noqa: S603 - fixed executable from node_modules
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=os.environ | {"NODE_OPTIONS": f'--require "{_EXIT_AFTER_CLOSE}"'},
        start_new_session=True,
        # SIGINT lets Azurite save its metadata before it exits (the preload script makes it exit).
        preexec_fn=die_with_parent(signal.SIGINT),
    )
    log.close()
    scheme = "http" if tls is None else "https"
    azurite = Azurite(blob_port, queue_port, table_port, location, process, owns, scheme)
    try:
        for port in azurite.ports:
            wait_for_port(port, timeout=timeout)
            if process.poll() is not None:
                raise RuntimeError(
                    f"Azurite exited with {process.returncode} while starting; see {azurite.log_path}"
                )
    except BaseException:
        azurite.stop()
        raise
    return azurite
