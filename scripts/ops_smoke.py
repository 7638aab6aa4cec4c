"""`claimcheck-ops smoke`: one small document through the deployed stack, end to end, with a verdict,
through the deployed HTTP API only (so it works when the Service Bus namespace is private, as prod's is:
the runner never opens a connection to the namespace).

1. Submit a generated contract of a few hundred bytes, classification `confidential` (so it travels by
   reference: blob, registry, envelope, consumer read, as every large document does) and purpose
   `contract-review`, whose cleanup policy is synchronous.
2. Poll the status API (bounded) until the work item is `completed`; `failed` or `expired` end the
   test at once with the state's reason.
3. Read the result (`GET /work-items/{id}/result`): it must be this work item's, of the completed
   version, with an analysis; the consumer writes it when it handles the result event, so a stored
   result is the API's evidence that the event went through. Its summary must carry the routing
   values the result event's application properties are made of (`document_type`, `priority`,
   `review_required`: what the topic's subscription filters match). The API does not expose the
   event itself (topic, subscriptions, sequence number), so which subscriptions took it is read on
   the audit subscription, not here.
4. Clean-up check: the payload must reach `removed` (the purpose's synchronous clean-up deletes it once
   the effect is confirmed). The result event and the audit records stay: they are the audit trail,
   which a test must not edit.

Every wait shares one deadline. The report never holds the document's bytes or a token.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scripts.ops_errors import OpsError

SMOKE_PURPOSE = "contract-review"
SMOKE_CLASSIFICATION = "confidential"
SMOKE_CONTENT_TYPE = "text/plain"
FINAL_FAILURES = ("failed", "expired")
# The priorities the analyzer gives (claimcheck.analysis.model); the notifications filter matches "high".
ROUTING_PRIORITIES = ("high", "normal")

Submit = Callable[[bytes], dict[str, Any]]  # document -> intake receipt
Status = Callable[[str], dict[str, Any]]  # work item id -> status view
# (work item id, version) -> (HTTP status, body) of GET /work-items/{id}/result?version=
Result = Callable[[str, int], tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class SmokeReport:
    work_item_id: str
    version: int
    state: str
    payload_state: str
    seconds: float


def smoke_document(run_id: str) -> bytes:
    """A short contract the default analyzer reads (parties, a payment term, a termination clause)."""
    return (
        f"SERVICE AGREEMENT (smoke test {run_id})\n\n"
        "This agreement is made between Example Buyer Ltd and Example Supplier GmbH.\n"
        "1. Payment. The buyer shall pay each invoice within 30 days of receipt.\n"
        "2. Termination. Either party may terminate this agreement with 60 days written notice.\n"
        "3. Confidentiality. Each party shall keep the other party's information confidential.\n"
    ).encode()


def result_problem(body: dict[str, Any], work_item_id: str, version: int) -> str | None:
    """Why a result answer is not this work item's completed analysis, or None if it is."""
    if body.get("work_item_id") != work_item_id:
        return f"the result names work item {body.get('work_item_id')!r}"
    if body.get("version") != version:
        return f"the result is of version {body.get('version')!r}, not {version}"
    if not isinstance(body.get("result"), dict) or not body["result"]:
        return "the result holds no analysis"
    summary = body.get("summary")
    if not isinstance(summary, dict):
        return "the result holds no summary (the result event's routing values)"
    if not isinstance(summary.get("document_type"), str) or not summary["document_type"]:
        return "the result's summary names no document_type (a routing value of the result event)"
    if summary.get("priority") not in ROUTING_PRIORITIES:
        return f"the result's priority {summary.get('priority')!r} is none of {list(ROUTING_PRIORITIES)}"
    if not isinstance(summary.get("review_required"), bool):
        return "the result's review_required is not true or false (a routing value of the result event)"
    return None


def run_smoke(
    submit: Submit,
    status: Status,
    result: Result,
    *,
    timeout_s: float = 300.0,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[str], None] = lambda line: None,
) -> SmokeReport:
    """Runs the four steps above; an OpsError says which step failed and what was last seen."""
    started = clock()
    deadline = started + timeout_s
    receipt = submit(smoke_document(uuid.uuid4().hex[:12]))
    work_item_id = str(receipt.get("work_item_id") or "")
    if not work_item_id:
        raise OpsError("the intake answer carries no work_item_id")
    progress(f"submitted work item {work_item_id}")

    def wait(step: str, check: Callable[[], tuple[bool, Any]]) -> Any:
        while True:
            found, last = check()
            if found:
                return last
            if clock() >= deadline:
                raise OpsError(
                    f"{step}: not done within {timeout_s:.0f} s (work item {work_item_id}; last seen: {last})"
                )
            sleep(poll_s)

    def completed() -> tuple[bool, Any]:
        view = status(work_item_id)
        state = str(view.get("state"))
        if state in FINAL_FAILURES:
            reason = view.get("failure_reason") or "no reason given"
            raise OpsError(f"work item {work_item_id} ended {state}: {reason}")
        return state == "completed", view if state == "completed" else state

    view = wait("waiting for the work item to complete", completed)
    version = int(view.get("version") or 0)
    progress(f"work item {work_item_id} completed (version {version})")

    code, body = result(work_item_id, version)
    if code != 200:
        raise OpsError(
            f"reading the result of work item {work_item_id}: HTTP {code} {body.get('error', '')}".rstrip()
        )
    problem = result_problem(body, work_item_id, version)
    if problem:
        raise OpsError(f"reading the result of work item {work_item_id}: {problem}")
    progress(f"result of version {version} stored")

    def payload_removed() -> tuple[bool, Any]:
        payload_state = str(status(work_item_id).get("payload_state"))
        return payload_state == "removed", f"payload state {payload_state}"

    wait("checking the payload was cleaned up", payload_removed)
    return SmokeReport(
        work_item_id=work_item_id,
        version=version,
        state="completed",
        payload_state="removed",
        seconds=round(clock() - started, 1),
    )
