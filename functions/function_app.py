"""The Function App: thin triggers that translate to calls into ``claimcheck``.

- ``POST /api/documents``: intake (producer.submit) → 202 with the work item, status URL and receipt.
- ``GET /api/work-items/{id}``: work-item status, optionally "at least version N".
- ``GET /api/openapi.json``: the HTTP contract (openapi.json next to this file), served anonymously.
- ``consume_document``: Service Bus trigger on the ``documents`` session queue with explicit settlement.
- ``reconcile``: timer trigger running the reconciler.

Cold start: only ``azure.functions`` and the Service Bus binding extension are imported here, because
the worker reads the trigger's parameter annotations when it indexes the app (the extension itself
imports azure.servicebus). ``claimcheck`` with the Storage SDKs and azure-identity is imported on the
first invocation, when the one ``ClaimCheck`` of this worker process is built.
"""

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import azure.functions as func
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions, ServiceBusReceivedMessage
from claimcheck.http_api import BadRequest, check_work_item_id, parse_min_version, read_submission
from claimcheck.settings import DOCUMENTS_QUEUE, SERVICEBUS_CONNECTION, STORAGE_CONNECTION, SettingsError

if TYPE_CHECKING:
    from claimcheck import ClaimCheck

logger = logging.getLogger("claimcheck.function_app")

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

# Every five minutes; reconciliation is idempotent, so an overlap with the ops command is harmless.
RECONCILE_SCHEDULE = "0 */5 * * * *"

# The checked-in OpenAPI 3.1 document of this app's HTTP API; a test keeps it and the routes in agreement.
OPENAPI_DOCUMENT = Path(__file__).with_name("openapi.json")

# Longest backoff waited out before abandoning a message to retry it (well under the lock renewal limit).
RETRY_PAUSE_CAP = timedelta(seconds=30)

_claimcheck: "ClaimCheck | None" = None
_claimcheck_lock = threading.Lock()


def claimcheck() -> "ClaimCheck":
    """The worker's one ClaimCheck, built on first use from app settings."""
    global _claimcheck
    with _claimcheck_lock:
        if _claimcheck is None:
            _claimcheck = _build_claimcheck(os.environ)
        return _claimcheck


def _build_claimcheck(env: Mapping[str, str]) -> "ClaimCheck":
    """Locally the connection names hold emulator/Azurite connection strings; on Azure, identity-based
    settings (``<name>__fullyQualifiedNamespace``, ``<name>__blobServiceUri``...) with a managed identity.
    """
    from azure.identity import DefaultAzureCredential
    from claimcheck import ClaimCheck
    from claimcheck.adapters.servicebus import ServiceBusBus
    from claimcheck.settings import Settings

    settings = Settings.from_env(env)
    credential = None
    bus_connection = env.get(SERVICEBUS_CONNECTION)
    storage_connection = env.get(STORAGE_CONNECTION)
    if not (bus_connection and storage_connection):
        credential = DefaultAzureCredential()
    send_timeout = float(settings.publish_timeout_seconds)
    if bus_connection:
        bus = ServiceBusBus(connection_string=bus_connection, send_timeout=send_timeout)
    else:
        namespace = _required(env, f"{SERVICEBUS_CONNECTION}__fullyQualifiedNamespace")
        bus = ServiceBusBus(
            fully_qualified_namespace=namespace, credential=credential, send_timeout=send_timeout
        )
    if storage_connection:
        return ClaimCheck.from_settings(settings, storage_connection=storage_connection, bus=bus)
    return ClaimCheck.from_settings(
        settings,
        blob_service_uri=_required(env, f"{STORAGE_CONNECTION}__blobServiceUri"),
        table_service_uri=_required(env, f"{STORAGE_CONNECTION}__tableServiceUri"),
        bus=bus,
        credential=credential,
    )


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise SettingsError(f"app setting {name} is not set (nor the connection string form)")
    return value


@app.route(route="documents", methods=["POST"])
def submit_document(req: func.HttpRequest) -> func.HttpResponse:
    """Intake: the body (or the multipart part ``document``) is the document; metadata in headers/fields."""
    from claimcheck import IntakeRejected
    from claimcheck.errors import PublishNotConfirmed

    try:
        submission = read_submission(req.headers, req.get_body())
        receipt = claimcheck().producer.submit(
            submission.document, content_type=submission.content_type, **submission.fields
        )
    except PublishNotConfirmed as unavailable:
        return _json(
            unavailable.http_status,
            {"error": unavailable.code, "message": str(unavailable)},
            headers={"Retry-After": str(max(1, round(unavailable.retry_after)))},
        )
    except IntakeRejected as rejected:
        return _json(rejected.http_status, {"error": rejected.code, "message": str(rejected)})
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    status_url = f"/api/work-items/{receipt.work_item_id}"
    body = {"work_item_id": receipt.work_item_id, "status_url": status_url, "receipt": receipt.to_dict()}
    return _json(202, body, headers={"Location": status_url})


@app.route(route="work-items/{id}", methods=["GET"])
def get_work_item(req: func.HttpRequest) -> func.HttpResponse:
    """Work-item state, payload state, result summary and receipt versions; never payload bytes."""
    try:
        work_item_id = check_work_item_id(req.route_params["id"])
        min_version = parse_min_version(req.params.get("min_version"))
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    view = claimcheck().status.get(work_item_id, min_version=min_version)
    if view is None:
        return _json(404, {"error": "not_found", "message": f"no work item {work_item_id}"})
    return _json(200, view.to_dict())


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def get_openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    """The contract, without authentication: it describes the API, holds no tenant data or secret, and a
    client needs it to learn how to call (and authenticate to) everything else."""
    return func.HttpResponse(OPENAPI_DOCUMENT.read_bytes(), status_code=200, mimetype="application/json")


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name=DOCUMENTS_QUEUE,
    connection=SERVICEBUS_CONNECTION,
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def consume_document(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    """Claim-check consumer: settle exactly as the consumer decided.

    Retry: the Functions host has no delayed abandon, and an immediate abandon would spend the
    delivery count in a tight loop. So the consumer's backoff is waited out here, holding the
    session (its later messages must wait anyway to keep their order; the host renews the lock),
    capped at RETRY_PAUSE_CAP, and then the message is abandoned. Before answering Retry at all, the
    consumer itself waits out another attempt's claim and short outages (docs/resilience.md).
    """
    from claimcheck import Complete, DeadLetter, Retry
    from claimcheck.adapters.servicebus import inbound_message

    outcome = claimcheck().consumer.handle(inbound_message(message))
    if isinstance(outcome, Complete):
        message_actions.complete(message)
    elif isinstance(outcome, Retry):
        pause = min(outcome.delay, RETRY_PAUSE_CAP)
        logger.info(
            "retrying message %s in %.1f s: %s", message.message_id, pause.total_seconds(), outcome.reason
        )
        time.sleep(pause.total_seconds())
        message_actions.abandon(message)
    elif isinstance(outcome, DeadLetter):
        message_actions.deadletter(
            message, deadletter_reason=str(outcome.reason), deadletter_error_description=outcome.description
        )


@app.timer_trigger(schedule=RECONCILE_SCHEDULE, arg_name="timer", run_on_startup=False)
def reconcile(timer: func.TimerRequest) -> None:
    """Orphans, missing objects and pending cleanups, on a schedule (dead-letter counts: claimcheck-ops)."""
    report = claimcheck().reconciler.run()
    # The reconciler logs its own counts and alerts; this line only ties them to the timer.
    logger.info("reconcile timer done (past_due=%s, alerts=%d)", timer.past_due, len(report.alerts))


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(body), status_code=status, mimetype="application/json", headers=headers
    )
