"""The running local stack as `claimcheck-ops`'s defaults, and `claimcheck-ops env`.

`python -m local.stack` writes `<data folder>/running.json` (local/running.py) once it serves; while
it runs, a command given no Service Bus (--connection-string / --namespace), no storage (reconcile,
revoke), no telemetry folder (trace) or no token issuer for a loopback --api uses the stack's own, so
nothing is copied by hand and nothing goes stale after a restart (Azurite's ports change every
start). An explicit option or environment variable always wins. CLAIMCHECK_LOCAL_STACK_DIR names
another data folder (python -m local.stack --data).
"""

from __future__ import annotations

import os
import shlex
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from scripts.ops_errors import OpsError

if TYPE_CHECKING:
    from local.running import RunningStack

LOCAL_STACK_DIR_ENV = "CLAIMCHECK_LOCAL_STACK_DIR"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _data_dir() -> Path:
    from local.running import DEFAULT_DATA_DIR

    configured = os.environ.get(LOCAL_STACK_DIR_ENV)
    return Path(configured) if configured else DEFAULT_DATA_DIR


def running_stack(*, required: bool = False) -> RunningStack | None:
    """The local stack running from the data folder, else None (or, when ``required``, an OpsError
    that says how to start one). A file left by a killed launcher counts as none running."""
    try:
        from local.running import StaleStack, read_running_stack
    except ImportError:  # an ops-only install (CI's deploy job) has no local/: no local stack either
        return None
    data = _data_dir()
    try:
        stack = read_running_stack(data)
    except StaleStack as stale:
        if required:
            raise OpsError(
                f"no local stack is running ({stale}): start one with python -m local.stack"
            ) from None
        return None
    if stack is None and required:
        raise OpsError(
            f"no local stack is running from {data}: start one with python -m local.stack "
            f"(or set {LOCAL_STACK_DIR_ENV} to its --data folder)"
        )
    return stack


def is_loopback(api: str) -> bool:
    return urllib.parse.urlsplit(api).hostname in _LOOPBACK


def bus_defaults(
    connection_string: str | None, namespace: str | None, management: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """(connection string, namespace, management connection string): the local stack's when neither
    a connection string nor a namespace was given."""
    if connection_string or namespace:
        return connection_string, namespace, management
    stack = running_stack()
    if stack is None:
        return connection_string, namespace, management
    return stack.servicebus, None, management or stack.servicebus_management


def storage_default(connection: str | None, blob_uri: str | None, table_uri: str | None) -> str | None:
    """The local stack's Azurite when no storage was given at all."""
    if connection or blob_uri or table_uri:
        return connection
    stack = running_stack()
    return None if stack is None else stack.storage


def api_default(api: str | None) -> str:
    """The API given, else the running local stack's, else the local stack's default port."""
    from scripts.ops_api import DEFAULT_API

    if api:
        return api
    stack = running_stack()
    return DEFAULT_API if stack is None else stack.api


def issuer_default(api: str, issuer: str | None) -> str | None:
    """The local stack's token issuer for a loopback API, when none was given."""
    if issuer or not is_loopback(api):
        return issuer
    stack = running_stack()
    return None if stack is None else stack.token_issuer


def telemetry_default(telemetry_dir: Path | None) -> Path:
    if telemetry_dir is not None:
        return telemetry_dir
    stack = running_stack()
    return Path(stack.telemetry_dir) if stack is not None else _data_dir() / "telemetry"


def exports() -> list[str]:
    """`export NAME='value'` lines for a shell: every setting claimcheck-ops reads, for the running
    local stack (its connection strings hold only the emulator's and Azurite's public development
    keys)."""
    stack = running_stack(required=True)
    assert stack is not None
    values = {
        "CLAIMCHECK_API": stack.api,
        "CLAIMCHECK_TOKEN_ISSUER": stack.token_issuer,
        "CLAIMCHECK_SERVICEBUS_CONNECTION": stack.servicebus,
        "CLAIMCHECK_SERVICEBUS_MANAGEMENT_CONNECTION": stack.servicebus_management,
        "CLAIMCHECK_STORAGE_CONNECTION": stack.storage,
        "CLAIMCHECK_TELEMETRY_DIR": stack.telemetry_dir,
    }
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items()]
