"""function_app reads its app settings in one place (``app_settings``): intake's inline cap, the
ClaimCheck and the operator routes' dead-letter queue all take the one parsed ``Settings``, so no two
readers of one worker can disagree about a value."""

from __future__ import annotations

import sys

import function_app
import pytest
from claimcheck.settings import DOCUMENTS_QUEUE_SETTING, SERVICEBUS_CONNECTION, SettingsError
from claimcheck.telemetry_settings import (
    AUTHENTICATION_STRING_SETTING,
    CONNECTION_STRING_SETTING,
    FILE_MAX_BYTES_SETTING,
    TELEMETRY_DIR_SETTING,
)

from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import load_function_app

CAP_SETTING = "CLAIMCHECK_MAX_INLINE_REQUEST_BYTES"


@pytest.fixture(autouse=True)
def _fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a new worker process: nothing parsed or built yet (monkeypatch restores the module's state)."""
    monkeypatch.setattr(function_app, "_settings", None)
    monkeypatch.setattr(function_app, "_dead_letters", None)


def test_the_inline_cap_and_the_dead_letter_queue_come_from_the_one_parsed_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAP_SETTING, "4096")
    monkeypatch.setenv(DOCUMENTS_QUEUE_SETTING, "documents-elsewhere")
    # A connection string is enough to build the client: nothing connects until a message is read.
    endpoint = (
        "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
    )
    monkeypatch.setenv(SERVICEBUS_CONNECTION, endpoint)
    settings = function_app.app_settings()
    assert function_app.inline_cap() == settings.max_inline_request_bytes == 4096
    assert function_app.dead_letters().queue == settings.documents_queue == "documents-elsewhere"
    # Parsed once per worker: a setting changed afterwards (Azure restarts the worker for that) is not
    # half-applied to one reader and not another.
    monkeypatch.setenv(CAP_SETTING, "8192")
    assert function_app.app_settings() is settings
    assert function_app.inline_cap() == 4096


def test_a_malformed_cap_is_a_settings_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAP_SETTING, "32MiB")
    with pytest.raises(SettingsError, match=CAP_SETTING):
        function_app.inline_cap()


def test_a_malformed_setting_refuses_the_app_when_it_is_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a 500 on each request and a spent delivery on each message: the host cannot load the app, and
    the error it reports names the setting."""
    monkeypatch.setitem(sys.modules, "function_app", function_app)  # the loader replaces it: put it back
    monkeypatch.setenv(CAP_SETTING, "0")
    with pytest.raises(SettingsError, match=CAP_SETTING):
        load_function_app(DEFAULT_APP)
    monkeypatch.setenv(CAP_SETTING, "4096")
    assert load_function_app(DEFAULT_APP).functions


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({TELEMETRY_DIR_SETTING: "telemetry", FILE_MAX_BYTES_SETTING: "8MiB"}, FILE_MAX_BYTES_SETTING),
        (
            {CONNECTION_STRING_SETTING: "InstrumentationKey=k", AUTHENTICATION_STRING_SETTING: "ClientId=c"},
            AUTHENTICATION_STRING_SETTING,
        ),
    ],
)
def test_malformed_telemetry_settings_refuse_the_app_when_it_is_indexed(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], named: str
) -> None:
    """The telemetry SDK is configured on the first invocation (cold start), but its settings are read
    at indexing: without this, every invocation would fail on them."""
    monkeypatch.setitem(sys.modules, "function_app", function_app)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=named):
        load_function_app(DEFAULT_APP)
