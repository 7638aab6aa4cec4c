"""`<data folder>/running.json`: where a running `python -m local.stack` can be reached.

The launcher writes it once every component answers and removes it when it stops, so `claimcheck-ops`
finds the stack's connection strings by itself (Azurite's ports are new on every start). A launcher
that was killed leaves it behind: its process id then names no live process, and the file is stale.
Standard library only: the ops CLI reads it wherever it runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

RUNNING_FILE = "running.json"
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / ".local-stack"


@dataclass(frozen=True)
class RunningStack:
    pid: int
    api: str
    token_issuer: str
    servicebus: str
    servicebus_management: str
    # Azurite's connection string: its public development account key, as in local.settings.json.
    storage: str
    telemetry_dir: str

    def write(self, data_dir: Path) -> Path:
        path = data_dir / RUNNING_FILE
        path.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")
        return path

    @property
    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, someone else's
            return True
        return True


class StaleStack(Exception):
    """running.json names a launcher that is no longer running."""


def read_running_stack(data_dir: Path = DEFAULT_DATA_DIR) -> RunningStack | None:
    """The stack running from ``data_dir``; None if none was started there. Raises ``StaleStack`` if
    the file is left from a launcher that no longer runs (killed before it could remove it)."""
    path = data_dir / RUNNING_FILE
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
        stack = RunningStack(**values)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise StaleStack(f"{path} is unreadable ({type(exc).__name__})") from None
    if not stack.alive:
        raise StaleStack(f"{path} names process {stack.pid}, which is not running")
    return stack


def remove_running_file(data_dir: Path) -> None:
    (data_dir / RUNNING_FILE).unlink(missing_ok=True)
