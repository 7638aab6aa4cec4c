"""The telemetry settings, read without the OpenTelemetry SDK (pure Python, part of the core).

``claimcheck.adapters.telemetry_setup`` configures the SDK from them on the first invocation; the
Function App checks them when the host indexes it (``check``), so a malformed one refuses the app at
start, naming the setting, like the settings of ``claimcheck.settings``, instead of failing every
invocation once the SDK is configured on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from claimcheck.settings import SettingsError

TELEMETRY_DIR_SETTING = "CLAIMCHECK_TELEMETRY_DIR"
CONNECTION_STRING_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
AUTHENTICATION_STRING_SETTING = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"
FILE_MAX_BYTES_SETTING = "CLAIMCHECK_TELEMETRY_FILE_MAX_BYTES"
# Azure's name for the instance a process runs on (the local host's scale-out sets it too): local
# telemetry files are per instance.
INSTANCE_ID_SETTING = "WEBSITE_INSTANCE_ID"
DEFAULT_FILE_MAX_BYTES = 8 * 1024 * 1024  # at ~9 KB of spans per document: the last ~1,800 documents


@dataclass(frozen=True)
class AzureMonitorTarget:
    connection_string: str
    client_id: str | None  # the user-assigned identity; None = the system-assigned one


def local_directory(env: Mapping[str, str]) -> Path | None:
    value = env.get(TELEMETRY_DIR_SETTING)
    return Path(value) if value else None


def file_max_bytes(env: Mapping[str, str]) -> int:
    """How large each local telemetry file may grow before it is rotated (SettingsError naming it)."""
    raw = env.get(FILE_MAX_BYTES_SETTING)
    if not raw:
        return DEFAULT_FILE_MAX_BYTES
    if not raw.isascii() or not raw.isdigit() or int(raw) <= 0:
        raise SettingsError(f"{FILE_MAX_BYTES_SETTING} must be a positive whole number of bytes, got {raw!r}")
    return int(raw)


def azure_monitor_target(env: Mapping[str, str]) -> AzureMonitorTarget | None:
    """The Application Insights target and the identity that authenticates to it, or None.

    Refuses (``SettingsError`` naming the setting) an authentication string that does not ask for
    Entra ID: ingestion with the instrumentation key alone is refused by the component."""
    connection_string = env.get(CONNECTION_STRING_SETTING)
    if not connection_string:
        return None
    raw = env.get(AUTHENTICATION_STRING_SETTING, "")
    pairs = dict(part.split("=", 1) for part in raw.split(";") if "=" in part)
    fields = {key.strip().lower(): value.strip() for key, value in pairs.items()}
    if fields.get("authorization") != "AAD":
        raise SettingsError(
            f"{AUTHENTICATION_STRING_SETTING} must be 'ClientId=<identity client id>;Authorization=AAD' "
            "(the Application Insights component accepts Entra ID authentication only)"
        )
    return AzureMonitorTarget(connection_string, fields.get("clientid") or None)


def check(env: Mapping[str, str]) -> None:
    """Raise the SettingsError the SDK's configuration would meet (the settings it reads), else nothing."""
    if local_directory(env) is not None:
        file_max_bytes(env)
    else:
        azure_monitor_target(env)
