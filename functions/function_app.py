"""The Function App: thin triggers that translate to calls into ``claimcheck``.

- ``POST /api/documents``: intake (producer.submit) → 202 with the work item, status URL and receipt.
- ``GET /api/work-items/{id}``: work-item status, optionally "at least version N".
- ``GET /api/work-items/{id}/result``: one version's full analysis result.
- ``GET /api/dead-letters``, ``POST /api/dead-letters/{n}/replay``: operators (Operations.Manage).
- ``GET /api/openapi.json``: the HTTP contract (openapi.json next to this file).
- ``consume_document``: Service Bus trigger on the ``documents`` session queue with explicit settlement.
- ``reconcile``: timer trigger running the reconciler.

Every HTTP route starts with ``_gate``: an Entra ID bearer token (claimcheck.auth) with the route's app
role, then the access table (claimcheck.access) decides which tenants the caller may use. The routes
keep AuthLevel.FUNCTION, but a function key identifies nobody: without a valid token it gets a 401.

Cold start: of the SDKs, only ``azure.functions`` and the Service Bus binding extension are imported
here, because the worker reads the trigger's parameter annotations when it indexes the app (the
extension itself imports azure.servicebus). The ``claimcheck`` core is imported at indexing too (pure
Python: it loads no Azure SDK, tests/unit/claimcheck/test_imports.py); its Azure adapters, with the
Storage SDKs and azure-identity, are imported on the first invocation, when the one ``ClaimCheck`` of
this worker process is built.
"""

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import azure.functions as func
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions, ServiceBusReceivedMessage
from claimcheck.http_api import (
    INTAKE_CONTROL_HEADERS,
    BadRequest,
    Unavailable,
    check_work_item_id,
    inline_body,
    none_match,
    parse_if_match,
    parse_min_version,
    read_submission,
    status_etag,
)
from claimcheck.settings import (
    DOCUMENTS_QUEUE_SETTING,
    SERVICEBUS_CONNECTION,
    STORAGE_CONNECTION,
    Settings,
    SettingsError,
)
from claimcheck.telemetry_settings import check as check_telemetry_settings
from upload_routes import upload_routes

if TYPE_CHECKING:
    from claimcheck import ClaimCheck
    from claimcheck.access import AccessTable
    from claimcheck.adapters.dead_letter_queue import QueueDeadLetters
    from claimcheck.auth import AppRole, Caller, SigningKeys, TokenRules
    from claimcheck.dead_letter_scope import DeadLetterScope
    from claimcheck.workitems import IntakeReceipt

logger = logging.getLogger("claimcheck.function_app")

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

# Every five minutes; reconciliation is idempotent, so an overlap with the ops command is harmless.
RECONCILE_SCHEDULE = "0 */5 * * * *"

# The checked-in OpenAPI 3.1 document of this app's HTTP API; a test keeps it and the routes in agreement.
OPENAPI_DOCUMENT = Path(__file__).with_name("openapi.json")

# Seconds an agent waits before reading again when the status read path is unavailable (503).
STATUS_RETRY_AFTER = 5

# Longest backoff waited out before abandoning a message to retry it (well under the lock renewal limit).
RETRY_PAUSE_CAP = timedelta(seconds=30)

_claimcheck: "ClaimCheck | None" = None
_claimcheck_lock = threading.Lock()
_identity: "tuple[TokenRules, SigningKeys, AccessTable] | None" = None
_dead_letters: "QueueDeadLetters | None" = None
_settings: Settings | None = None
_settings_lock = threading.Lock()

# Operator routes: at most this many dead-lettered messages per answer, browsed from this many.
DEAD_LETTER_PAGE = 100
DEAD_LETTER_BROWSE = 1000


def claimcheck() -> "ClaimCheck":
    """The worker's one ClaimCheck, built on first use from app settings."""
    global _claimcheck
    with _claimcheck_lock:
        if _claimcheck is None:
            from claimcheck.adapters.telemetry_setup import configure as configure_telemetry

            configure_telemetry(os.environ)  # the OpenTelemetry SDK, on first use like the other SDKs
            _claimcheck = _build_claimcheck(os.environ, app_settings())
        return _claimcheck


def app_settings() -> Settings:
    """The worker's app settings (claimcheck.settings.SETTINGS), parsed once on first use: the one value
    the ClaimCheck, intake's inline cap and the dead-letter routes' queue all read. A malformed setting
    is a SettingsError naming it."""
    global _settings
    with _settings_lock:
        if _settings is None:
            _settings = Settings.from_env(os.environ)
        return _settings


# Parsed at indexing, not on a first request: a malformed setting refuses the app at start, naming the
# setting (the host reports the import error and starts no trigger), instead of a 500 on every request
# and a delivery spent on every message until each is dead-lettered. Pure Python: no SDK is loaded. The
# telemetry settings too, though the SDK they configure is loaded on first use.
app_settings()
check_telemetry_settings(os.environ)


def _build_claimcheck(env: Mapping[str, str], settings: Settings) -> "ClaimCheck":
    """Locally the connection names hold emulator/Azurite connection strings; on Azure, identity-based
    settings (``<name>__fullyQualifiedNamespace``, ``<name>__blobServiceUri``...) with a managed identity.
    """
    from azure.identity import DefaultAzureCredential
    from claimcheck import ClaimCheck
    from claimcheck.adapters.servicebus import ServiceBusBus

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
    dead_letters = None
    if credential is not None and not bus_connection:
        # The reconciler's dead-letter counts: runtime properties of the documents queue (the app holds
        # Data Owner on it, infra/) and the age of its oldest dead-lettered message, with the app's identity.
        from azure.servicebus import ServiceBusClient
        from azure.servicebus.management import ServiceBusAdministrationClient
        from claimcheck.adapters.busadmin import ServiceBusDeadLetters

        dead_letters = ServiceBusDeadLetters(
            ServiceBusAdministrationClient(namespace, credential),
            ServiceBusClient(namespace, credential),
            queues=[settings.documents_queue],
        )
    return ClaimCheck.from_settings(
        settings,
        blob_service_uri=_required(env, f"{STORAGE_CONNECTION}__blobServiceUri"),
        table_service_uri=_required(env, f"{STORAGE_CONNECTION}__tableServiceUri"),
        bus=bus,
        credential=credential,
        dead_letters=dead_letters,
    )


def identity() -> "tuple[TokenRules, SigningKeys, AccessTable]":
    """The worker's token rules, cached signing keys and access table, built on first use."""
    global _identity
    with _claimcheck_lock:
        if _identity is None:
            from claimcheck.access import AccessTable
            from claimcheck.adapters.jwks import jwks_fetcher
            from claimcheck.auth import TokenRules
            from claimcheck.signing_keys import CachedSigningKeys

            rules = TokenRules.from_env(os.environ)
            keys = CachedSigningKeys(jwks_fetcher(rules.jwks_uri))
            _identity = (rules, keys, AccessTable.from_env(os.environ))
        return _identity


def inline_cap() -> int:
    """POST /documents' largest request body (``Settings.max_inline_request_bytes``). Intake enforces it
    from Content-Length before the body is read; the host's own limit, what bounds a request's memory, is
    derived from it (the cap plus the 1 MiB multipart margin, claimcheck.settings.host_request_body_limit)."""
    return app_settings().max_inline_request_bytes


def _gate(req: func.HttpRequest, *roles: "AppRole") -> "Caller | func.HttpResponse":
    """The caller a valid bearer token proves, if it holds one of ``roles``; else the refusal to answer.

    401 and 403 bodies are fixed: which check failed goes to the log (never the token itself).
    """
    from claimcheck.auth import (
        MISSING_ROLE_BODY,
        UNAUTHENTICATED_BODY,
        WWW_AUTHENTICATE,
        KeysUnavailable,
        MissingRole,
        Unauthenticated,
        authenticate,
        require_role,
    )

    try:
        rules, keys, _ = identity()
        caller = authenticate(req.headers.get("authorization"), rules, keys)
        require_role(caller, roles)
    except SettingsError as error:
        logger.error("refusing %s: %s", req.method, error)
        return _json(503, {"error": "unavailable", "message": "the API's identity settings are incomplete"})
    except KeysUnavailable as error:
        logger.warning("refusing %s: %s", req.method, error)
        unavailable = {"error": "unavailable", "message": "cannot verify tokens now"}
        return _json(503, unavailable, {"Retry-After": "5"})
    except Unauthenticated as error:
        logger.info("401 for %s: %s", req.method, error)
        return _json(401, UNAUTHENTICATED_BODY, {"WWW-Authenticate": WWW_AUTHENTICATE})
    except MissingRole as error:
        logger.info("403 for %s: %s", req.method, error)
        return _json(403, MISSING_ROLE_BODY)
    return caller


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise SettingsError(f"app setting {name} is not set (nor the connection string form)")
    return value


@app.route(route="documents", methods=["POST"])
def submit_document(req: func.HttpRequest) -> func.HttpResponse:
    """Intake: the body (or the multipart part ``document``) is the document; metadata in headers/fields.

    ``Idempotency-Key`` (claimcheck.intake_keys): a retry answers the first request's receipt.
    ``If-Match``: required for a new version of an existing work item (412 on a stale version).
    """
    from claimcheck import IntakeRejected
    from claimcheck.access import FORBIDDEN_BODY, AccessForbidden
    from claimcheck.auth import AppRole
    from claimcheck.errors import (
        ConflictDetected,
        PreconditionRequired,
        PublishNotConfirmed,
        RequestInProgress,
    )
    from claimcheck.intake_keys import check_idempotency_key, fingerprint, intake_key_id

    caller = _gate(req, AppRole.SUBMIT)
    if isinstance(caller, func.HttpResponse):
        return caller
    try:
        # Above the inline cap the answer is 413 use_direct_upload, decided from Content-Length before
        # the body is read (the local host then never reads it); nothing is stored or published.
        received = inline_body(req.headers.get("content-length"), req.get_body, inline_cap())
        submission = read_submission(req.headers, received)
        if_match = parse_if_match(req.headers.get(INTAKE_CONTROL_HEADERS[1]))
        raw_key = req.headers.get(INTAKE_CONTROL_HEADERS[0])
        key = None if raw_key is None else _checked(check_idempotency_key, raw_key)
        fields = submission.fields
        if fields.get("tenant_id"):  # a missing tenant is the producer's 400 missing_tenant
            identity()[2].check(
                caller,
                tenant_id=str(fields["tenant_id"]),
                purpose=str(fields.get("purpose", "")),
                classification=str(fields.get("classification", "")),
            )
        service = claimcheck()

        def write() -> "IntakeReceipt":
            return service.producer.submit(
                submission.document,
                content_type=submission.content_type,
                if_match=if_match,
                require_if_match=True,
                **fields,
            )

        replayed = False
        if key is None:
            receipt = write()
        else:
            # Scoped to who the token proves and the tenant: nobody else's key can answer for ours.
            scope = f"{caller.directory_tenant}/{caller.object_id or caller.app_id}"
            sent = fingerprint(submission.document, {**fields, "if_match": if_match}, submission.content_type)
            receipt, replayed = service.intake_keys.once(
                intake_key_id(scope, str(fields.get("tenant_id", "")), key), sent, write
            )
    except AccessForbidden:
        return _json(403, FORBIDDEN_BODY)
    except PublishNotConfirmed as unavailable:
        return _json(
            unavailable.http_status,
            {"error": unavailable.code, "message": str(unavailable)},
            headers={"Retry-After": str(max(1, round(unavailable.retry_after)))},
        )
    except (ConflictDetected, PreconditionRequired) as stale:
        body = {"error": stale.code, "message": str(stale), "current_version": stale.current_version}
        if isinstance(stale, ConflictDetected):
            body |= {"visibility": "conflict_detected", "next_action": "re_read", "retry_after": None}
        return _json(stale.http_status, body)
    except RequestInProgress as running:
        body = {"error": running.code, "message": str(running)}
        return _json(running.http_status, body, headers={"Retry-After": str(round(running.retry_after))})
    except IntakeRejected as rejected:
        return _json(rejected.http_status, {"error": rejected.code, "message": str(rejected)})
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    except Exception as error:  # the HTTP trigger's boundary: only an outage is answered here (503)
        outage = Unavailable.answer("intake", error, logger)
        if outage is None:
            raise
        return _json(Unavailable.status, outage, Unavailable.headers)
    status_url = f"/api/work-items/{receipt.work_item_id}"
    body = {"work_item_id": receipt.work_item_id, "status_url": status_url, "receipt": receipt.to_dict()}
    headers = {"Location": status_url}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return _json(202, body, headers=headers)


def _checked(check: "Callable[[str], str]", raw: str) -> str:
    """``check(raw)``, its ValueError as the API's 400."""
    try:
        return check(raw)
    except ValueError as error:
        raise BadRequest(str(error)) from None


@app.route(route="work-items/{id}", methods=["GET"])
def get_work_item(req: func.HttpRequest) -> func.HttpResponse:
    """Work-item state, payload state, result summary and receipt versions; never payload bytes.

    Scoped to the caller's tenants (narrowed by X-Tenant-Id when given): another tenant's work item
    answers exactly like an unknown id. With ``min_version`` the answer carries the read-after-write
    ``visibility`` and ``next_action`` (claimcheck.final_states); every 200 carries an ``ETag``, and
    ``If-None-Match`` with the current one answers 304.
    """
    from claimcheck.auth import AppRole

    caller = _gate(req, AppRole.READ, AppRole.OPERATE)
    if isinstance(caller, func.HttpResponse):
        return caller
    try:
        work_item_id = check_work_item_id(req.route_params["id"])
        min_version = parse_min_version(req.params.get("min_version"))
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    visible = identity()[2].read_scope(caller, req.headers.get("x-tenant-id"))
    from claimcheck.resilience import is_unavailable

    try:
        view = claimcheck().status.get(work_item_id, min_version=min_version, tenant_visible=visible)
    except Exception as error:  # the HTTP trigger's boundary: only an outage is answered here (503)
        if not is_unavailable(error):  # unreachable, or answering 5xx, 408 or 429
            raise
        # No authoritative read, so no answer at all: a stale one could make an agent write again.
        logger.warning("status read of %s unavailable: %s", work_item_id, type(error).__name__)
        unavailable = {
            "error": "unavailable",
            "message": "the authoritative store cannot be read now; ask again after Retry-After",
            "next_action": "wait",
            "retry_after": STATUS_RETRY_AFTER,
        }
        return _json(503, unavailable, {"Retry-After": str(STATUS_RETRY_AFTER)})
    if view is None:
        # The same answer for an unknown id and another tenant's (it names only what the caller sent).
        return _json(404, {"error": "not_found", "message": f"no work item {work_item_id}"})
    answer = view.answer
    if answer is not None and answer.http_status == 404:
        body = {
            "error": "unknown_version",
            "message": f"version {min_version} of {work_item_id} was never accepted",
            **answer.to_dict(),
        }
        return _json(404, body)
    payload = json.dumps(view.to_dict()).encode()
    # no-cache: a cache may keep the answer but must revalidate it (If-None-Match) before every use, so
    # no intermediary hands an agent an old version as current.
    headers = {"ETag": status_etag(view.version, payload), "Cache-Control": "no-cache"}
    if answer is not None and answer.retry_after is not None:
        headers["Retry-After"] = str(answer.retry_after)
    if none_match(req.headers.get("if-none-match"), headers["ETag"]):
        return func.HttpResponse(status_code=304, headers=headers)
    return func.HttpResponse(payload, status_code=200, mimetype="application/json", headers=headers)


@app.route(route="work-items/{id}/result", methods=["GET"])
def get_work_item_result(req: func.HttpRequest) -> func.HttpResponse:
    """One version's full analysis (parties, dates, obligations with pages; never payload bytes).

    ``version`` defaults to the latest visible one. Scoped like the status route: another tenant's
    work item or result answers exactly like an unknown id. A version without a result yet: 404
    ``no_result`` with its state (wait for it with the status route first).
    """
    from claimcheck.auth import AppRole

    caller = _gate(req, AppRole.READ, AppRole.OPERATE)
    if isinstance(caller, func.HttpResponse):
        return caller
    try:
        work_item_id = check_work_item_id(req.route_params["id"])
        version = parse_min_version(req.params.get("version"), "version")
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    visible = identity()[2].read_scope(caller, req.headers.get("x-tenant-id"))
    from claimcheck.resilience import is_unavailable

    service = claimcheck()
    try:
        view = service.status.get(work_item_id, tenant_visible=visible)
        wanted = 0 if view is None else view.version if version is None else version
        results = service.results
        stored = (
            None
            if results is None or wanted < 1
            else results.get(work_item_id, wanted, tenant_visible=visible)
        )
    except Exception as error:  # the HTTP trigger's boundary: only an outage is answered here (503)
        if not is_unavailable(error):  # unreachable, or answering 5xx, 408 or 429
            raise
        logger.warning("result read of %s unavailable: %s", work_item_id, type(error).__name__)
        unavailable = {
            "error": "unavailable",
            "message": "the result store cannot be read now; ask again later",
        }
        return _json(503, unavailable, {"Retry-After": str(STATUS_RETRY_AFTER)})
    if view is None:
        return _json(404, {"error": "not_found", "message": f"no work item {work_item_id}"})
    if stored is None:
        message = f"no result for version {wanted} of {work_item_id}; the work item is {view.state}"
        return _json(404, {"error": "no_result", "message": message, "state": view.state})
    return _json(200, stored.to_dict())


def dead_letters() -> "QueueDeadLetters":
    """The worker's view of the documents queue's dead-letter subqueue, built on first use. Locally the
    emulator's connection string; on Azure the namespace with the app's identity (Data Owner on it)."""
    global _dead_letters
    with _claimcheck_lock:
        if _dead_letters is None:
            from azure.servicebus import ServiceBusClient
            from claimcheck.adapters.dead_letter_queue import QueueDeadLetters

            env = os.environ
            retry: dict[str, Any] = {"retry_total": 1, "retry_backoff_max": 2}
            connection = env.get(SERVICEBUS_CONNECTION)
            if connection:
                client = ServiceBusClient.from_connection_string(connection, **retry)
            else:
                from azure.identity import DefaultAzureCredential

                namespace = _required(env, f"{SERVICEBUS_CONNECTION}__fullyQualifiedNamespace")
                client = ServiceBusClient(namespace, DefaultAzureCredential(), **retry)
            _dead_letters = QueueDeadLetters(client, app_settings().documents_queue)
        return _dead_letters


@app.route(route="dead-letters", methods=["GET"])
def list_dead_letters(req: func.HttpRequest) -> func.HttpResponse:
    """Operators: the documents queue's dead-lettered messages, metadata only (reason, description,
    work item, tenant, purpose, delivery count), those attributed to one of the caller's tenants by
    the work item's own record (claimcheck.dead_letter_scope), shown as that record has them: what a
    message states decides nothing, and one its record does not confirm (a forgery, a copy under
    another session, a message with no record) is shown to no caller of this route. X-Tenant-Id
    narrows to one of those tenants like the status route; a tenant not granted lists nothing."""
    from claimcheck.auth import AppRole
    from claimcheck.errors import BrokerFailed, BrokerUnavailable, StorageFailed, StorageUnavailable

    caller = _gate(req, AppRole.OPERATE)
    if isinstance(caller, func.HttpResponse):
        return caller
    try:
        requested = parse_min_version(req.params.get("limit"), "limit")
        # "At most this many": 0 lists none (``or`` would have read it as absent: the default page).
        limit = DEAD_LETTER_PAGE if requested is None else min(requested, DEAD_LETTER_PAGE)
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    try:
        desk = dead_letters()
        found = desk.list(DEAD_LETTER_BROWSE)
        scope = _dead_letter_scope(caller, req.headers.get("x-tenant-id"))
        # Lazily: the records of work items past the page are not read.
        attributed = ((m, scope.shows(m.stated)) for m in found)
        shown = list(islice((m.attributed_to(r) for m, r in attributed if r is not None), limit))
    except (BrokerUnavailable, BrokerFailed) as error:
        return _unavailable("dead-letter list", error)
    except (StorageUnavailable, StorageFailed) as error:
        return _unavailable("dead-letter attribution", error, "Storage")
    return _json(200, {"queue": desk.queue, "messages": [message.to_dict() for message in shown]})


@app.route(route="dead-letters/{sequence_number}/replay", methods=["POST"])
def replay_dead_letter(req: func.HttpRequest) -> func.HttpResponse:
    """Operators: send a dead-lettered message back to the documents queue once (copy id
    ``<message id>.replay.<sequence number>``, as ``claimcheck-ops dlq replay``), then complete it.
    A message the caller may not see (the list route's rule, X-Tenant-Id included) answers exactly like
    one that is not there, and is left untouched."""
    from claimcheck.adapters.dead_letter_queue import ReplayStatus
    from claimcheck.auth import AppRole
    from claimcheck.errors import BrokerFailed, BrokerUnavailable, StorageFailed, StorageUnavailable

    caller = _gate(req, AppRole.OPERATE)
    if isinstance(caller, func.HttpResponse):
        return caller
    try:
        sequence_number = parse_min_version(req.route_params["sequence_number"], "sequence_number") or 0
    except BadRequest as bad:
        return _json(400, {"error": bad.code, "message": str(bad)})
    missing = {"error": "not_found", "message": f"no dead-lettered message {sequence_number}"}
    try:
        desk = dead_letters()
        found = desk.find(sequence_number)
        scope = _dead_letter_scope(caller, req.headers.get("x-tenant-id"))
        if found is None or scope.shows(found.stated) is None:
            return _json(404, missing)
        # The sequence number names that one message for its whole life: the replay moves the message
        # just checked, never another.
        result = desk.replay(sequence_number)
    except (BrokerUnavailable, BrokerFailed) as error:
        return _unavailable("replay", error)
    except (StorageUnavailable, StorageFailed) as error:
        return _unavailable("dead-letter attribution", error, "Storage")
    if result.status is ReplayStatus.NOT_FOUND:
        return _json(404, missing)
    if result.status is ReplayStatus.SEND_FAILED:
        failed = {"error": "replay_failed", "message": result.detail}
        return _json(503, failed, {"Retry-After": str(STATUS_RETRY_AFTER)})
    logger.info("replayed dead-lettered message %d as %s", sequence_number, result.replay_message_id)
    return _json(200, result.to_dict())


def _dead_letter_scope(caller: "Caller", selected_tenant: str | None) -> "DeadLetterScope":
    """What ``caller`` may see of the dead-letter queue: attributed by the work items' own records, of
    its granted tenants narrowed by X-Tenant-Id exactly as the status routes are (AccessTable.read_scope)."""
    from claimcheck.dead_letter_scope import DeadLetterScope

    visible = identity()[2].read_scope(caller, selected_tenant)
    return DeadLetterScope(claimcheck().status.record, visible)


def _unavailable(what: str, error: Exception, service: str = "Service Bus") -> func.HttpResponse:
    """503 when Service Bus (the queue) or Storage (the work items' records) does not answer."""
    logger.warning("%s unavailable: %s", what, error)  # the adapter's text: operation and SDK type only
    unavailable = {"error": "unavailable", "message": f"{service} cannot be reached now; ask again later"}
    return _json(503, unavailable, {"Retry-After": str(STATUS_RETRY_AFTER)})


@app.route(route="openapi.json", methods=["GET"])
def get_openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    """The contract, for any caller holding one of the API's app roles: no route is anonymous (the
    document holds no tenant data, but an anonymous route is one the policy pack cannot tell apart from
    a forgotten gate; a client learns the audience and roles from the stack outputs or the README)."""
    from claimcheck.auth import AppRole

    caller = _gate(req, AppRole.SUBMIT, AppRole.READ, AppRole.OPERATE)
    if isinstance(caller, func.HttpResponse):
        return caller
    return func.HttpResponse(OPENAPI_DOCUMENT.read_bytes(), status_code=200, mimetype="application/json")


@app.service_bus_queue_trigger(
    arg_name="message",
    # An app setting expression the host resolves: the topology's queue name (infra/ and the local stack
    # write CLAIMCHECK_DOCUMENTS_QUEUE from it), never a second spelling here.
    queue_name=f"%{DOCUMENTS_QUEUE_SETTING}%",
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
        # Completed first, cleaned up after (docs/architecture.md §9: never delete before the message is
        # completed). A failed completion raises here, before any delete: the record stays processed and the
        # redelivery (a duplicate) or the reconciler, after its interrupted-cleanup grace, finishes it.
        # The step never raises.
        message_actions.complete(message)
        outcome.after_settlement()
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
    uploads = claimcheck().uploads
    if uploads is not None:  # staging blobs of direct uploads never committed (claimcheck.uploads)
        uploads.sweep()
    # The reconciler logs its own counts and alerts; this line only ties them to the timer.
    logger.info("reconcile timer done (past_due=%s, alerts=%d)", timer.past_due, len(report.alerts))


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(body), status_code=status, mimetype="application/json", headers=headers
    )


# Large documents: a write-only grant to a staging blob, then a verified commit (upload_routes.py).
app.register_functions(
    upload_routes(gate=_gate, access=lambda: identity()[2], service=claimcheck, answer=_json)
)
