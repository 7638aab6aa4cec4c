"""What the claim-check MCP tools do, as plain methods over ``claimcheck.client`` (no MCP in here).

``scripts/mcp_server.py`` publishes these as MCP tools. Every call goes through the stack's HTTP API with
the agent's own token: this module holds no storage or Service Bus credential and adds no privilege.

- ``submit_document`` derives its ``Idempotency-Key`` from its arguments and the document's sha256, so a
  model that calls it again with the same arguments gets the first receipt, never a second version.
- Transport failures (no answer, 503, ``request_in_progress``) are retried here, with the same key for
  a submission; the model is never asked to resend a document.
- A refusal of the API becomes a ``ToolRefusal``: the API's code, its message and one line saying what
  the model should do next. The texts name only what the caller sent (another tenant's work item reads
  exactly like an unknown one), never a token, a payload byte or a storage location.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.client import ApiError, ClaimCheckClient, Receipt

# Bounds that keep every tool call finite: a model can never start an unbounded wait.
MAX_WAIT_SECONDS = 300
DEFAULT_WAIT_SECONDS = 120
# base64 content travels inside one JSON-RPC message; larger documents go by path.
MAX_INLINE_BYTES = 8 * 1024 * 1024
# Reads (status, result) retried on no answer / 503: attempts and the longest total pause.
READ_ATTEMPTS = 4
READ_DEADLINE_SECONDS = 30.0
_RETRYABLE_READ_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_HASH_CHUNK = 1024 * 1024

# One line per API code (and per final state): what the model should do. Never "send it again".
REMEDIES: Mapping[str, str] = {
    "unauthenticated": "The server's own identity was refused (token missing, expired or for another "
    "audience); no argument fixes this: stop and ask an operator to fix the server's sign-in.",
    "forbidden": "This identity may not use that tenant, purpose or classification (or lacks the role); "
    "use values it is granted, or stop and ask an operator for access.",
    "not_found": "No work item with that id is visible to this identity: check the work_item_id from "
    "your receipt; do not submit the document again because of this.",
    "unknown_version": "That version was never accepted: stop; use the version from your receipt, or "
    "call get_status without min_version to see the current one.",
    "conflict_detected": "Someone wrote a newer version with other content: call get_status without "
    "min_version, re-read the latest version and decide again; do not overwrite it.",
    "precondition_required": "A new version of an existing work item needs if_match_version: call "
    "get_status and pass its 'version' as if_match_version.",
    "propagation_exceeded": "The version was accepted but is still not visible after its deadline: do "
    "not write again; hand the work item to an operator to reconcile.",
    "needs_reconciliation": "The version failed, expired, or its stored object is missing or damaged "
    "(see failure_reason): do not resubmit on your own; hand it to an operator.",
    "no_result": "No result for that version: while its state is accepted or running, call wait_for "
    "and read it once next_action is proceed; a failed or expired version has none (hand it to an operator).",
    "idempotency_key_reused": "A different document was already submitted with these arguments' key: "
    "check the document and its metadata.",
    "work_item_conflict": "That work item id belongs to another submission or a concurrent write took "
    "the version: call get_status and decide again.",
    "payload_too_large": "The document is larger than the stack accepts: it cannot be submitted as is.",
    "use_direct_upload": "The document is too large to send in one request and nothing was stored: this "
    "tool sends documents that large through the direct upload by itself, so report that the server's "
    "inline limit is below its client's threshold.",
    "forbidden_content_type": "The purpose does not allow that content type, or the bytes are not of "
    "the declared type: fix content_type or choose the right purpose.",
    "unknown_purpose": "Use one of the purposes listed in this tool's schema.",
    "invalid_classification": "Use one of the classifications listed in this tool's schema.",
    "missing_tenant": "Give tenant_id.",
    "empty_payload": "The document is empty: give a non-empty file or content.",
    "invalid_request": "An argument is malformed (the message names it): fix that argument.",
    "bad_request": "An argument is malformed (the message names it): fix that argument.",
    "invalid_arguments": "Fix the arguments as the message says.",
    "invalid_upload": "The document's length could not be declared: check that the file is readable and "
    "not empty.",
    "upload_mismatch": "The file changed while it was uploaded; nothing was stored: make sure nothing else "
    "writes the file, then submit it again.",
    "upload_not_found": "The large-document upload expired before it was committed; nothing was stored: "
    "submit it again (the same arguments are safe).",
    "internal_error": "The stack failed on this request (a bug, logged there): stop and report it.",
    "request_header_fields_too_large": "An argument is too long to send: shorten the ids or metadata.",
    "dead_letter_not_found": "No dead-lettered message with that sequence number is visible now (already "
    "replayed or removed): call list_dead_letters again.",
    "replay_failed": "The copy could not be sent; the message stays dead-lettered: report it, or try "
    "replay_dead_letter again later (a repeated replay is de-duplicated).",
    "unavailable": "The stack did not answer after the retries this tool already made (with the same "
    "idempotency key): stop and report that the claim-check stack is unavailable.",
}
_DEFAULT_REMEDY = "Stop and report this error; do not resend the document."
# What each next_action asks of the model, carried in status answers.
NEXT_STEPS: Mapping[str, str] = {
    "proceed": "The version is visible and processed: call get_result.",
    "wait": "Not final yet: call wait_for (or get_status after retry_after seconds); never submit again.",
    "stop": REMEDIES["unknown_version"],
    "reconcile": REMEDIES["needs_reconciliation"],
    "re_read": REMEDIES["conflict_detected"],
}


class ToolRefusal(Exception):
    """A refusal the model can act on: the API's code, its message and a one-line remedy."""

    def __init__(self, code: str, message: str, *, status: int | None = None, **extra: Any) -> None:
        self.code = code
        self.message = message
        self.status = status
        self.remedy = REMEDIES.get(code, _DEFAULT_REMEDY)
        self.extra = {name: value for name, value in extra.items() if value is not None}
        super().__init__(self.text())

    def text(self) -> str:
        """One JSON object: what the MCP tool error carries for the model."""
        fields = {"error": self.code, "http_status": self.status, "message": self.message, **self.extra}
        return json.dumps({**fields, "remedy": self.remedy})

    @classmethod
    def from_answer(cls, status: int, body: Mapping[str, Any]) -> ToolRefusal:
        code = str(body.get("error") or ("unavailable" if status >= 500 else "error"))
        if code in (
            "no_answer",
            "not_json",
            "service_busy",
            "publish_not_confirmed",
            "request_in_progress",
        ) or (code == "upload_failed"):
            code = "unavailable"  # the client already retried these with the same key
        return cls(
            code,
            str(body.get("message", ""))[:300],
            status=status,
            current_version=body.get("current_version"),
            state=body.get("state"),
        )


@dataclass(frozen=True)
class DocumentSource:
    """The document of one submission: a path under an allowed root, or the decoded bytes."""

    source: Path | bytes
    sha256: str


class AgentTools:
    def __init__(
        self,
        client: ClaimCheckClient,
        *,
        roots: Sequence[Path],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``roots``: the folders ``submit_document`` may read a path from (nothing outside them)."""
        self._client = client
        self._roots = tuple(root.resolve() for root in roots)
        self._sleep = sleep
        self._clock = clock

    def submit_document(
        self,
        *,
        tenant_id: str,
        purpose: str,
        classification: str,
        content_type: str,
        path: str | None = None,
        content_base64: str | None = None,
        work_item_id: str | None = None,
        if_match_version: int | None = None,
    ) -> dict[str, Any]:
        document = self._document(path, content_base64)
        # Same arguments, same document → same key → the API answers the first receipt.
        key_material = json.dumps(
            [
                tenant_id,
                purpose,
                classification,
                content_type,
                work_item_id,
                if_match_version,
                document.sha256,
            ]
        )
        key = "mcp-" + hashlib.sha256(key_material.encode()).hexdigest()[:48]
        try:
            receipt = self._client.submit(
                document.source,
                tenant_id=tenant_id,
                purpose=purpose,
                classification=classification,
                content_type=content_type,
                work_item_id=work_item_id,
                if_match=if_match_version,
                idempotency_key=key,
            )
        except ApiError as error:
            raise ToolRefusal.from_answer(error.status, error.body) from None
        return _receipt(receipt)

    def get_status(self, *, work_item_id: str, min_version: int | None = None) -> dict[str, Any]:
        status, body = self._read(lambda: self._client.status(work_item_id, min_version))
        if status != 200:
            raise ToolRefusal.from_answer(status, body)
        return _status(body)

    def wait_for(
        self, *, work_item_id: str, min_version: int, timeout_seconds: float = DEFAULT_WAIT_SECONDS
    ) -> dict[str, Any]:
        """Poll until a final state or ``timeout_seconds`` (at most MAX_WAIT_SECONDS)."""
        deadline = max(1.0, min(float(timeout_seconds), MAX_WAIT_SECONDS))
        # One read first: an unknown (or another tenant's) id is refused at once instead of polled.
        answer = self.get_status(work_item_id=work_item_id, min_version=min_version)
        answer["exhausted"] = False
        if answer["next_action"] == "wait":
            pending = Receipt(work_item_id, min_version, idempotency_key="", replayed=False, raw={})
            try:
                final = self._client.wait(pending, deadline_seconds=deadline)
            except ApiError as error:
                raise ToolRefusal.from_answer(error.status, error.body) from None
            if final.body.get("error"):  # unknown_version (404), or no answer until the deadline
                unknown = final.body["error"] == "unknown_version"
                raise ToolRefusal.from_answer(404 if unknown else 503, final.body)
            answer = _status(final.body) | {"exhausted": final.exhausted}
            if final.exhausted:
                answer |= {"next_action": "wait", "next_step": NEXT_STEPS["wait"]}
        if answer["next_action"] in ("stop", "reconcile", "re_read"):
            visibility = str(answer.get("visibility") or answer["next_action"])
            raise ToolRefusal(
                visibility,
                f"version {min_version} of {work_item_id}: {visibility}",
                state=answer.get("state"),
                failure_reason=answer.get("failure_reason"),
                version=answer.get("version"),
            )
        return answer

    def get_result(self, *, work_item_id: str, version: int | None = None) -> dict[str, Any]:
        status, body = self._read(lambda: self._client.result(work_item_id, version))
        if status != 200:
            raise ToolRefusal.from_answer(status, body)
        result = body.get("result") or {}
        return {
            "work_item_id": body.get("work_item_id", work_item_id),
            "version": body.get("version"),
            "completed_at": body.get("completed_at"),
            "document_type": result.get("document_type"),
            "parties": list(result.get("parties", [])),
            "dates": list(result.get("dates", [])),
            "obligations": list(result.get("obligations", [])),
            "page_count": result.get("page_count"),
            "review_required": result.get("review_required"),
            "priority": result.get("priority"),
            "truncated": result.get("truncated", False),
        }

    def list_dead_letters(self, *, limit: int = 50, tenant_id: str | None = None) -> dict[str, Any]:
        status, body = self._read(lambda: self._client.dead_letters(limit, tenant_id=tenant_id))
        if status != 200:
            raise ToolRefusal.from_answer(status, body)
        return {"queue": body.get("queue"), "messages": list(body.get("messages", []))}

    def replay_dead_letter(self, *, sequence_number: int, tenant_id: str | None = None) -> dict[str, Any]:
        # Resending is safe: the copy's message id is fixed per dead-lettered message (de-duplicated).
        status, body = self._read(
            lambda: self._client.replay_dead_letter(sequence_number, tenant_id=tenant_id)
        )
        if status == 404:
            raise ToolRefusal("dead_letter_not_found", str(body.get("message", ""))[:300], status=404)
        if status != 200:
            raise ToolRefusal.from_answer(status, body)
        return body

    def _read(self, call: Callable[[], tuple[int, dict[str, Any]]]) -> tuple[int, dict[str, Any]]:
        """A GET, retried on no answer / 503 (safe: it changes nothing), bounded in attempts and time."""
        give_up_at = self._clock() + READ_DEADLINE_SECONDS
        status, body = call()
        for attempt in range(1, READ_ATTEMPTS):
            if status not in _RETRYABLE_READ_STATUSES:
                break
            delay = random.uniform(0, 0.5 * 2**attempt)
            retry_after = body.get("retry_after")
            if isinstance(retry_after, int):
                delay = max(delay, float(retry_after))
            if self._clock() + delay >= give_up_at:
                break
            self._sleep(delay)
            status, body = call()
        return status, body

    def _document(self, path: str | None, content_base64: str | None) -> DocumentSource:
        if (path is None) == (content_base64 is None):
            raise ToolRefusal("invalid_arguments", "give exactly one of path or content_base64")
        if content_base64 is not None:
            try:
                data = base64.b64decode(content_base64, validate=True)
            except (binascii.Error, ValueError):
                raise ToolRefusal("invalid_arguments", "content_base64 is not valid base64") from None
            if len(data) > MAX_INLINE_BYTES:
                raise ToolRefusal(
                    "invalid_arguments",
                    f"content_base64 is over {MAX_INLINE_BYTES} bytes: pass a path instead",
                )
            return DocumentSource(data, hashlib.sha256(data).hexdigest())
        assert path is not None
        resolved = Path(path).expanduser().resolve()
        if not any(resolved.is_relative_to(root) for root in self._roots):
            roots = ", ".join(str(root) for root in self._roots)
            raise ToolRefusal("invalid_arguments", f"path must be inside the allowed folders: {roots}")
        if not resolved.is_file():
            raise ToolRefusal("invalid_arguments", f"no readable file at {path}")
        digest = hashlib.sha256()
        with resolved.open("rb") as stream:
            while chunk := stream.read(_HASH_CHUNK):
                digest.update(chunk)
        return DocumentSource(resolved, digest.hexdigest())


def _receipt(receipt: Receipt) -> dict[str, Any]:
    return {
        "work_item_id": receipt.work_item_id,
        "version": receipt.version,
        "replayed": receipt.replayed,
        "idempotency_key": receipt.idempotency_key,
        "receipt": dict(receipt.raw.get("receipt", {})),
        "next_step": f"call wait_for with work_item_id {receipt.work_item_id}, min_version {receipt.version}",
    }


def _status(body: Mapping[str, Any]) -> dict[str, Any]:
    next_action = str(body.get("next_action") or "")
    return {
        "work_item_id": body.get("work_item_id"),
        "state": body.get("state"),
        "version": body.get("version"),
        "visibility": body.get("visibility"),
        "next_action": next_action,
        "retry_after": body.get("retry_after"),
        "payload_state": body.get("payload_state"),
        "failure_reason": body.get("failure_reason"),
        "receipt_versions": list(body.get("receipt_versions", [])),
        "result_summary": body.get("result"),
        "next_step": NEXT_STEPS.get(next_action, _DEFAULT_REMEDY),
    }
