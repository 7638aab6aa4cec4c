"""`claimcheck-ops smoke`: one small document through the deployed stack, end to end, with a verdict.

1. Submit a generated contract of a few hundred bytes, classification `confidential` (so it travels by
   reference: blob, registry, envelope, consumer read, as every large document does) and purpose
   `contract-review`, whose cleanup policy is synchronous.
2. Poll the status API (bounded) until the work item is `completed`; `failed` or `expired` end the
   test at once with the state's reason.
3. Peek the `audit` subscription of the results topic until the result event for this work item is
   there (peek takes no lock and removes nothing).
4. Clean-up check: the payload must reach `removed` (the purpose's synchronous clean-up deletes it once
   the effect is confirmed). The result event and the audit records stay: they are the audit trail,
   which a test must not edit; the event leaves `audit` with its consumer or its TTL.

Every wait shares one deadline. The report never holds the document's bytes or a token.
"""

from __future__ import annotations

import json
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

Submit = Callable[[bytes], dict[str, Any]]  # document -> intake receipt
Status = Callable[[str], dict[str, Any]]  # work item id -> status view
FindAuditEvent = Callable[[str], int | None]  # work item id -> sequence number in `audit`, or None


@dataclass(frozen=True)
class SmokeReport:
    work_item_id: str
    state: str
    payload_state: str
    audit_sequence_number: int
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


def result_event_matches(body: bytes, work_item_id: str) -> bool:
    """Whether a result event's JSON body (summary.work_item_id) belongs to `work_item_id`."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    summary = parsed.get("summary") if isinstance(parsed, dict) else None
    return isinstance(summary, dict) and summary.get("work_item_id") == work_item_id


def run_smoke(
    submit: Submit,
    status: Status,
    find_audit_event: FindAuditEvent,
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

    def wait(step: str, check: Callable[[], Any]) -> Any:
        last: Any = None
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
        return state == "completed", state

    wait("waiting for the work item to complete", completed)
    progress(f"work item {work_item_id} completed")

    def in_audit() -> tuple[bool, Any]:
        sequence = find_audit_event(work_item_id)
        return sequence is not None, sequence if sequence is not None else "no result event yet"

    sequence = int(wait("looking for the result event in the audit subscription", in_audit))
    progress(f"result event in audit (sequence number {sequence})")

    def payload_removed() -> tuple[bool, Any]:
        payload_state = str(status(work_item_id).get("payload_state"))
        return payload_state == "removed", f"payload state {payload_state}"

    wait("checking the payload was cleaned up", payload_removed)
    return SmokeReport(
        work_item_id=work_item_id,
        state="completed",
        payload_state="removed",
        audit_sequence_number=sequence,
        seconds=round(clock() - started, 1),
    )
