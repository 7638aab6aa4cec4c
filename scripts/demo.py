"""`make demo`: the claim-check journey of the sample contracts on the local stack, end to end.

Starts Azurite, the Service Bus emulator and the Functions host; sends the samples from
samples/contracts/ over HTTP (text and PDF, one over the inline threshold, one tampered after upload,
one forged for another tenant) plus an invalid envelope straight to the queue; follows each one from
the intake receipt through the queue and the consumer to its result event and the subscriptions that
received it, or to the dead-letter queue with its reason. Ends with a summary table, stops the stack,
and exits 0 only if every document ended as expected.

Two cases need the consumer to wait: the demo holds the work item's session (a session receiver of
its own, exactly what a second consumer would do) while it tampers with the stored object or copies
the envelope, then releases the session to the consumer.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver, ServiceBusSubQueue
from azure.storage.blob import BlobServiceClient
from claimcheck.envelope import parse_envelope
from claimcheck.settings import DOCUMENTS_QUEUE, PAYLOAD_CONTAINER, RESULTS_TOPIC
from rich.console import Console
from rich.live import Live
from rich.table import Table

from local.stack import LocalStack, start_stack

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "contracts"
SUBSCRIPTIONS = ("audit", "notifications", "review", "contracts")
COMPLETED = "completed"
PROCESSING_TIMEOUT_SECONDS = 120.0


@dataclass
class Case:
    """One document of the demo, what should happen to it, and what did."""

    title: str
    sample: str
    tenant: str
    expected: str  # "completed" or the expected dead-letter reason
    expected_subscriptions: frozenset[str] = frozenset()
    classification: str = "internal"
    how: str = "http"  # http | tampered | forged | invalid
    work_item_id: str = field(default_factory=lambda: f"wi-demo-{uuid.uuid4().hex[:12]}")
    intake: str = "-"
    state: str = "not sent"
    outcome: str | None = None
    subscriptions: tuple[str, ...] = ()

    @property
    def content_type(self) -> str:
        return "application/pdf" if self.sample.endswith(".pdf") else "text/plain"

    @property
    def as_expected(self) -> bool:
        if self.outcome != self.expected:
            return False
        return self.outcome != COMPLETED or set(self.subscriptions) == self.expected_subscriptions


def demo_cases() -> list[Case]:
    contract_subscriptions = frozenset({"audit", "contracts", "review"})
    return [
        Case("Service agreement (text)", "service-agreement.txt", "acme", COMPLETED, contract_subscriptions),
        Case(
            "Contrato (texto, pt-BR)",
            "contrato-prestacao-servicos.txt",
            "acme",
            COMPLETED,
            contract_subscriptions,
        ),
        Case(
            "Supply agreement (PDF, confidential)",
            "supply-agreement.pdf",
            "globex",
            COMPLETED,
            contract_subscriptions,
            classification="confidential",
        ),
        Case(
            "Master agreement (46 KB, over the inline threshold)",
            "master-agreement-large.txt",
            "acme",
            COMPLETED,
            frozenset({"audit", "contracts"}),
        ),
        Case(
            "Urgent notice (high priority)",
            "urgent-notice.txt",
            "initech",
            COMPLETED,
            frozenset({"audit", "notifications"}),
        ),
        Case(
            "Service agreement, tampered after upload",
            "service-agreement.txt",
            "acme",
            "integrity_failed",
            classification="confidential",
            how="tampered",
        ),
        Case(
            "Globex's envelope replayed as tenant acme",
            "supply-agreement.pdf",
            "acme",
            "access_denied",
            classification="confidential",
            how="forged",
        ),
        Case("Invalid envelope sent straight to the queue", "-", "-", "invalid_envelope", how="invalid"),
    ]


class Demo:
    def __init__(self, stack: LocalStack, console: Console) -> None:
        self.stack = stack
        self.console = console
        self.http = requests.Session()
        self.bus = ServiceBusClient.from_connection_string(stack.servicebus_connection_string)
        self.blobs = BlobServiceClient.from_connection_string(stack.storage_connection_string)

    def close(self) -> None:
        self.bus.close()
        self.blobs.close()
        self.http.close()

    # --- sending --------------------------------------------------------------------------------

    def send(self, case: Case) -> None:
        if case.how == "http":
            self._submit(case)
        elif case.how == "tampered":
            with self._held_session(case.work_item_id) as hold:
                self._submit(case)
                ref = parse_envelope(self._queued_body(hold)).payload_ref
                self.blobs.get_blob_client(PAYLOAD_CONTAINER, str(ref)).upload_blob(
                    b"Tampered: not the document that was registered.\n", overwrite=True
                )
                self.console.print(
                    f"  [yellow]tampered[/] the stored object of {case.work_item_id} "
                    "while its session was held; releasing it to the consumer"
                )
        elif case.how == "forged":
            self._send_forged(case)
        else:
            self._send_raw(
                case,
                b'{"schema": "claimcheck.envelope", "work_item_id": "' + case.work_item_id.encode() + b'"}',
            )
            case.intake = "sent to the queue"

    def _submit(self, case: Case, *, tenant: str | None = None, work_item_id: str | None = None) -> None:
        headers = {
            "X-Tenant-Id": tenant or case.tenant,
            "X-Purpose": "contract-review",
            "X-Classification": case.classification,
            "X-Work-Item-Id": work_item_id or case.work_item_id,
            "Content-Type": case.content_type,
        }
        response = self.http.post(
            f"{self.stack.api_url}/documents",
            data=(SAMPLES / case.sample).read_bytes(),
            headers=headers,
            timeout=60,
        )
        if response.status_code != 202:
            case.intake, case.outcome = f"HTTP {response.status_code}", response.json().get("error", "?")
            return
        receipt = response.json()["receipt"]
        case.intake = f"202 {receipt['transport']} v{receipt['version']} sha256 {receipt['sha256'][:8]}"
        case.state = "queued"

    def _send_forged(self, case: Case) -> None:
        """Submit a document for globex, copy its envelope, and send the copy as tenant acme."""
        original = f"wi-demo-{uuid.uuid4().hex[:12]}"
        with self._held_session(original) as hold:
            self._submit(case, tenant="globex", work_item_id=original)
            envelope = parse_envelope(self._queued_body(hold))
        forged = dataclasses.replace(envelope, tenant_id=case.tenant, work_item_id=case.work_item_id)
        outbound = forged.to_message(priority="normal", document_type="contract", review_required=False)
        self._send_raw(
            case,
            outbound.body,
            properties={key: value for key, value in outbound.application_properties.items()},
        )
        case.intake = f"envelope of {original} (globex), tenant set to acme"
        self.console.print(f"  [yellow]forged[/] envelope sent for {case.work_item_id}")

    def _send_raw(self, case: Case, body: bytes, properties: dict[str | bytes, Any] | None = None) -> None:
        with self.bus.get_queue_sender(DOCUMENTS_QUEUE) as sender:
            sender.send_messages(
                ServiceBusMessage(
                    body,
                    session_id=case.work_item_id,
                    message_id=case.work_item_id,
                    content_type="application/json",
                    application_properties=properties,
                )
            )
        case.state = "queued"

    def _held_session(self, session_id: str) -> ServiceBusReceiver:
        """A receiver holding the session: the consumer cannot take it until the receiver closes."""
        receiver = self.bus.get_queue_receiver(DOCUMENTS_QUEUE, session_id=session_id)
        receiver.peek_messages(max_message_count=1)  # opening the link accepts (locks) the session
        return receiver

    @staticmethod
    def _queued_body(hold: ServiceBusReceiver) -> bytes:
        [message] = hold.peek_messages(max_message_count=1)
        return b"".join(message.body)

    # --- following ------------------------------------------------------------------------------

    def follow(self, cases: list[Case]) -> None:
        """Poll work-item status and the dead-letter queue until every case has an outcome."""
        deadline = time.monotonic() + PROCESSING_TIMEOUT_SECONDS
        with Live(journey_table(cases), console=self.console, refresh_per_second=4) as live:
            while any(case.outcome is None for case in cases) and time.monotonic() < deadline:
                dead = self._dead_letter_reasons()
                for case in (case for case in cases if case.outcome is None):
                    self._update(case, dead)
                live.update(journey_table(cases))
                time.sleep(0.5)
            results = self._result_subscriptions()
            for case in cases:
                case.subscriptions = results.get(case.work_item_id, ())
                if case.outcome is None:
                    case.outcome = f"timed out ({case.state})"
            live.update(journey_table(cases))

    def _update(self, case: Case, dead: dict[str, str]) -> None:
        if case.work_item_id in dead:
            case.state, case.outcome = "dead-lettered", dead[case.work_item_id]
            return
        response = self.http.get(f"{self.stack.api_url}/work-items/{case.work_item_id}", timeout=30)
        if response.status_code == 200:
            view = response.json()
            case.state = view["state"]
            if view["state"] == COMPLETED:
                case.outcome = COMPLETED

    def _dead_letter_reasons(self) -> dict[str, str]:
        with self.bus.get_queue_receiver(
            DOCUMENTS_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as receiver:
            return {
                str(message.session_id): str(message.dead_letter_reason)
                for message in receiver.peek_messages(max_message_count=250)
            }

    def _result_subscriptions(self) -> dict[str, tuple[str, ...]]:
        """Which subscriptions received each work item's result event (peeked, nothing consumed)."""
        received: dict[str, list[str]] = {}
        for subscription in SUBSCRIPTIONS:
            with self.bus.get_subscription_receiver(RESULTS_TOPIC, subscription) as receiver:
                for message in receiver.peek_messages(max_message_count=250):
                    work_item_id = json.loads(b"".join(message.body))["summary"]["work_item_id"]
                    received.setdefault(work_item_id, []).append(subscription)
        return {work_item_id: tuple(names) for work_item_id, names in received.items()}


def journey_table(cases: list[Case]) -> Table:
    table = Table(title="Claim-check journey", expand=True)
    for column in (
        "Document",
        "Tenant",
        "Intake receipt",
        "Queue → consumer",
        "Result / dead-letter reason",
        "Subscriptions",
    ):
        table.add_column(column, overflow="fold")
    for case in cases:
        outcome = case.outcome or "…"
        style = "green" if case.outcome == COMPLETED else ("red" if case.outcome else "")
        table.add_row(
            case.title,
            case.tenant,
            case.intake,
            case.state,
            f"[{style}]{outcome}[/]" if style else outcome,
            ", ".join(case.subscriptions),
        )
    return table


def summary_table(cases: list[Case]) -> Table:
    table = Table(title="Summary")
    for column in ("Document", "Expected", "Got", ""):
        table.add_column(column)
    for case in cases:
        expected = case.expected
        if case.expected == COMPLETED:
            expected += f" → {', '.join(sorted(case.expected_subscriptions))}"
        got = str(case.outcome)
        if case.outcome == COMPLETED:
            got += f" → {', '.join(sorted(case.subscriptions))}"
        table.add_row(case.title, expected, got, "[green]✓[/]" if case.as_expected else "[red]✗[/]")
    return table


def main() -> int:
    console = Console()
    with console.status("Starting Azurite, the Service Bus emulator and the Functions host…"):
        stack = start_stack()
    console.print(f"Local stack up: API {stack.api_url}, logs in {stack.work_dir}")
    cases = demo_cases()
    demo = Demo(stack, console)
    try:
        for case in cases:
            demo.send(case)
        demo.follow(cases)
        console.print(summary_table(cases))
    finally:
        demo.close()
        with console.status("Stopping the local stack…"):
            stack.stop()
    failures = [case for case in cases if not case.as_expected]
    if failures:
        console.print(f"[red]{len(failures)} document(s) did not end as expected.[/]")
        return 1
    console.print("[green]Every document ended as expected.[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
