"""Cold start of functions/function_app.py: indexing the app must not load the heavy SDKs."""

from __future__ import annotations

import json
import subprocess
import sys

from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import HttpFunction, ServiceBusFunction, TimerFunction, load_function_app

_LOADED_AFTER_IMPORT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import function_app
heavy = (
    "azure.storage", "azure.data.tables", "azure.identity", "pypdf", "claimcheck.adapters",
    "opentelemetry.sdk", "azure.monitor",
)
print(json.dumps(sorted(name for name in sys.modules if name.startswith(heavy))))
"""


def test_importing_the_app_loads_no_storage_identity_or_pdf_sdk() -> None:
    """Only azure.functions and the Service Bus binding extension load at import; the rest (the
    OpenTelemetry SDK and the Azure Monitor distro too) on first use."""
    output = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER_IMPORT, str(DEFAULT_APP.parent)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert json.loads(output) == []


def test_the_app_declares_the_four_triggers_the_design_names() -> None:
    """Intake and status over HTTP, the session consumer with explicit settlement, the reconciler timer."""
    app = load_function_app(DEFAULT_APP)
    routes = {
        (function.route, tuple(sorted(function.methods or ()))) for function in app.of_type(HttpFunction)
    }
    assert routes == {
        ("documents", ("POST",)),
        ("work-items/{id}", ("GET",)),
        ("openapi.json", ("GET",)),
        ("work-items/{id}/result", ("GET",)),
        # Operators: the dead-letter list and replay.
        ("dead-letters", ("GET",)),
        ("dead-letters/{sequence_number}/replay", ("POST",)),
        # Large documents: the direct-upload grant and its commit (functions/upload_routes.py).
        ("uploads", ("POST",)),
        ("uploads/{upload_id}/commit", ("POST",)),
    }
    [consumer] = app.of_type(ServiceBusFunction)
    # The queue comes from the app setting the topology fills (tests/infra/test_bindings.py follows a
    # rename through it).
    assert (consumer.queue_name, consumer.connection, consumer.is_sessions_enabled) == (
        "%CLAIMCHECK_DOCUMENTS_QUEUE%",
        "ServiceBusConnection",
        True,
    )
    assert (consumer.auto_complete_messages, consumer.message_actions_arg) == (False, "message_actions")
    assert len(app.of_type(TimerFunction)) == 1
