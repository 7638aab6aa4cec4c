"""The direct-upload routes (claimcheck.uploads): large documents bypass the 100 MB request limit.

- ``POST /api/uploads``: intake's headers plus ``X-Upload-Content-Type`` and ``X-Upload-Length`` →
  201 with a write-only grant for one staging blob (``upload_url``, a secret: ``Cache-Control:
  no-store``, never logged).
- ``POST /api/uploads/{upload_id}/commit``: the same headers plus ``X-Upload-Sha256``,
  ``Idempotency-Key`` and ``If-Match`` as intake → the staged bytes are streamed, verified and stored
  through the producer → 202 with the same body as ``POST /api/documents``.

Both pass the same gate as intake (bearer token with ``Documents.Submit``, then the access table for
tenant, purpose and classification). A Blueprint built by ``upload_routes`` from function_app's own
gate, access table and service, so this module adds routes without a second copy of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import azure.functions as func
from claimcheck.http_api import (
    INTAKE_CONTROL_HEADERS,
    BadRequest,
    Submission,
    Unavailable,
    parse_if_match,
    read_submission,
)

if TYPE_CHECKING:
    from claimcheck import ClaimCheck
    from claimcheck.access import AccessTable
    from claimcheck.auth import Caller
    from claimcheck.uploads import Declared, DirectUploads
    from claimcheck.workitems import IntakeReceipt

_log = logging.getLogger("claimcheck.upload_routes")

Gate = Callable[..., "Caller | func.HttpResponse"]
Answer = Callable[[int, dict[str, Any], dict[str, str] | None], func.HttpResponse]


def upload_routes(
    *,
    gate: Gate,
    access: Callable[[], AccessTable],
    service: Callable[[], ClaimCheck],
    answer: Answer,
) -> func.Blueprint:
    _gate = gate  # the name every gated handler calls (a test checks each route for it)
    routes = func.Blueprint()  # type: ignore[no-untyped-call]  # the library's __init__ is untyped

    def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> func.HttpResponse:
        return answer(status, body, headers)

    @routes.route(route="uploads", methods=["POST"])
    def start_upload(req: func.HttpRequest) -> func.HttpResponse:
        """A write-only grant for one staging blob, after the same checks intake makes."""
        from claimcheck.access import FORBIDDEN_BODY, AccessForbidden
        from claimcheck.auth import AppRole
        from claimcheck.errors import IntakeRejected
        from claimcheck.uploads import UploadRefused

        caller = _gate(req, AppRole.SUBMIT)
        if isinstance(caller, func.HttpResponse):
            return caller
        try:
            submission, declared = _read(req, need_sha256=False)
            _check_access(access(), caller, submission)
            uploads = _uploads(service())
            uploads.check(submission.fields, declared)
            grant = uploads.grant(scope=_scope(caller), tenant_id=str(submission.fields["tenant_id"]))
        except AccessForbidden:
            return _json(403, FORBIDDEN_BODY)
        except UploadRefused as refused:
            return _json(refused.http_status, {"error": refused.code, "message": str(refused)})
        except IntakeRejected as rejected:
            return _json(rejected.http_status, {"error": rejected.code, "message": str(rejected)})
        except BadRequest as bad:
            return _json(400, {"error": bad.code, "message": str(bad)})
        except Exception as error:  # the HTTP trigger's boundary: only an outage is answered here (503)
            # On Azure the grant's signing key comes from storage (Get User Delegation Key).
            outage = Unavailable.answer("upload grant", error, _log)
            if outage is None:
                raise
            return _json(Unavailable.status, outage, Unavailable.headers)
        # no-store: the answer carries a grant, which no cache may keep.
        return _json(201, grant.to_dict(), {"Cache-Control": "no-store"})

    @routes.route(route="uploads/{upload_id}/commit", methods=["POST"])
    def commit_upload(req: func.HttpRequest) -> func.HttpResponse:
        """Verify the staged bytes (length, sha256) while the producer stores them; then as intake."""
        from claimcheck.access import FORBIDDEN_BODY, AccessForbidden
        from claimcheck.auth import AppRole
        from claimcheck.errors import (
            ConflictDetected,
            IdempotencyKeyReused,
            IntakeRejected,
            PreconditionRequired,
            PublishNotConfirmed,
            RequestInProgress,
        )
        from claimcheck.intake_keys import (
            check_idempotency_key,
            fingerprint,
            intake_key_id,
            upload_commit_key_id,
        )
        from claimcheck.uploads import UploadRefused, check_upload_id

        caller = _gate(req, AppRole.SUBMIT)
        if isinstance(caller, func.HttpResponse):
            return caller
        try:
            submission, declared = _read(req, need_sha256=True)
            if_match = parse_if_match(req.headers.get(INTAKE_CONTROL_HEADERS[1]))
            raw_key = req.headers.get(INTAKE_CONTROL_HEADERS[0])
            key = None if raw_key is None else _checked_key(check_idempotency_key, raw_key)
            _check_access(access(), caller, submission)
            claimcheck = service()
            uploads = _uploads(claimcheck)
            # The grant's policy again, on what this commit declares (the staged blob is whatever the grant
            # holder wrote): a document the stack refuses is refused before a byte is read or reserved.
            uploads.check(submission.fields, declared)
            upload_id = check_upload_id(req.route_params.get("upload_id", ""))
            fields = submission.fields
            tenant_id = str(fields["tenant_id"])

            def write() -> IntakeReceipt:
                name, reader = uploads.open_staged(
                    upload_id, scope=_scope(caller), tenant_id=tenant_id, declared=declared
                )
                receipt = claimcheck.producer.submit(
                    reader,
                    content_type=declared.content_type,
                    if_match=if_match,
                    require_if_match=True,
                    **fields,
                )
                uploads.discard(name)
                return receipt

            # The same ledger as intake: "the same content" is the declared length and sha256.
            sent = fingerprint(
                b"",
                {**fields, "if_match": if_match, "length": declared.length, "sha256": declared.sha256},
                declared.content_type,
            )
            replayed = False

            def once_per_upload() -> IntakeReceipt:
                # Every commit of this upload, keyed or not, goes through its one row: a second commit
                # (a retry after a timeout, a double click) waits or answers the first receipt instead
                # of streaming the same staged bytes into a second document.
                nonlocal replayed
                row = upload_commit_key_id(_scope(caller), tenant_id, upload_id)
                try:
                    receipt, replayed = claimcheck.intake_keys.once(row, sent, write)
                except RequestInProgress:
                    raise RequestInProgress("another commit of this upload is still running") from None
                except IdempotencyKeyReused:
                    raise IdempotencyKeyReused(
                        "this upload was committed with other metadata, length or sha256"
                    ) from None
                return receipt

            if key is None:
                receipt = once_per_upload()
            else:
                receipt, keyed_replay = claimcheck.intake_keys.once(
                    intake_key_id(_scope(caller), tenant_id, key), sent, once_per_upload
                )
                replayed = replayed or keyed_replay
        except AccessForbidden:
            return _json(403, FORBIDDEN_BODY)
        except UploadRefused as refused:
            return _json(refused.http_status, {"error": refused.code, "message": str(refused)})
        except PublishNotConfirmed as unavailable:
            retry_after = str(max(1, round(unavailable.retry_after)))
            refusal = {"error": unavailable.code, "message": str(unavailable)}
            return _json(unavailable.http_status, refusal, {"Retry-After": retry_after})
        except (ConflictDetected, PreconditionRequired) as stale:
            body: dict[str, Any] = {
                "error": stale.code,
                "message": str(stale),
                "current_version": stale.current_version,
            }
            if isinstance(stale, ConflictDetected):
                body |= {"visibility": "conflict_detected", "next_action": "re_read", "retry_after": None}
            return _json(stale.http_status, body)
        except RequestInProgress as running:
            busy = {"error": running.code, "message": str(running)}
            return _json(running.http_status, busy, {"Retry-After": str(round(running.retry_after))})
        except IntakeRejected as rejected:
            return _json(rejected.http_status, {"error": rejected.code, "message": str(rejected)})
        except BadRequest as bad:
            return _json(400, {"error": bad.code, "message": str(bad)})
        except Exception as error:  # the HTTP trigger's boundary: only an outage is answered here (503)
            outage = Unavailable.answer("upload commit", error, _log)
            if outage is None:
                raise
            return _json(Unavailable.status, outage, Unavailable.headers)
        status_url = f"/api/work-items/{receipt.work_item_id}"
        accepted = {
            "work_item_id": receipt.work_item_id,
            "status_url": status_url,
            "receipt": receipt.to_dict(),
        }
        headers = {"Location": status_url}
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        return _json(202, accepted, headers)

    return routes


def _read(req: func.HttpRequest, *, need_sha256: bool) -> tuple[Submission, Declared]:
    """Intake's metadata headers (the request's own Content-Type describes no document here)."""
    from claimcheck.uploads import read_declared

    headers = {name: value for name, value in req.headers.items() if name.lower() != "content-type"}
    return read_submission(headers, b""), read_declared(headers, need_sha256=need_sha256)


def _check_access(table: AccessTable, caller: Caller, submission: Submission) -> None:
    fields = submission.fields
    if fields.get("tenant_id"):  # a missing tenant is the policy's 400 missing_tenant
        table.check(
            caller,
            tenant_id=str(fields["tenant_id"]),
            purpose=str(fields.get("purpose", "")),
            classification=str(fields.get("classification", "")),
        )


def _uploads(claimcheck: ClaimCheck) -> DirectUploads:
    from claimcheck.uploads import UploadRefused

    if claimcheck.uploads is None:
        raise UploadRefused("direct upload is not configured", code="unavailable", http_status=503)
    return claimcheck.uploads


def _scope(caller: Caller) -> str:
    """Who the token proves, as intake scopes Idempotency-Keys: no other caller shares an upload."""
    return f"{caller.directory_tenant}/{caller.object_id or caller.app_id}"


def _checked_key(check: Callable[[str], str], raw: str) -> str:
    try:
        return check(raw)
    except ValueError as error:
        raise BadRequest(str(error)) from None
