"""The documents of `make demo`, what should happen to each, and what the demo observed for it.

Everything observed comes from the running system: the intake receipt (HTTP 202), the status API
(`GET /api/work-items/{id}`), the consumer's INFO lines in the Functions host log, the dead-letter
queue (reason and description) and the result events peeked on the topic's subscriptions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

COMPLETED = "completed"
CONTRACT_SUBSCRIPTIONS = frozenset({"audit", "contracts", "review"})


@dataclass
class Case:
    """One document of the demo, what should happen to it, and what was observed."""

    title: str
    sample: str
    tenant: str
    expected: str  # "completed" or the expected dead-letter reason
    expected_subscriptions: frozenset[str] = frozenset()
    classification: str = "internal"
    how: str = "http"  # http | tampered | forged | invalid
    signer: str = "issuer"  # issuer | foreign: the token is signed by a key the issuer does not publish
    label: str = ""  # short name for progress lines; the sample's file name when empty
    work_item_id: str = field(default_factory=lambda: f"wi-demo-{uuid.uuid4().hex[:12]}")
    # Observed: intake
    intake: str = "-"
    message_id: str | None = None  # of the queued envelope; the host log names messages by it
    transport: str | None = None  # "inline" | "reference", from the receipt
    # Observed: status API
    state: str = "not sent"
    payload_state: str | None = None
    result: dict[str, Any] | None = None
    # Observed: host log
    consumer_completed: bool = False
    retries: list[str] = field(default_factory=list)
    cleanup: str | None = None
    # Observed: dead-letter queue and subscriptions
    dead_letter_description: str | None = None
    outcome: str | None = None  # "completed", a dead-letter reason, an HTTP error or "timed out (...)"
    subscriptions: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.label or self.sample

    @property
    def content_type(self) -> str:
        return "application/pdf" if self.sample.endswith(".pdf") else "text/plain"

    @property
    def as_expected(self) -> bool:
        if self.outcome != self.expected:
            return False
        return self.outcome != COMPLETED or set(self.subscriptions) == self.expected_subscriptions


def demo_cases() -> list[Case]:
    return [
        Case("Service agreement (text)", "service-agreement.txt", "acme", COMPLETED, CONTRACT_SUBSCRIPTIONS),
        Case(
            "Contrato (texto, pt-BR)",
            "contrato-prestacao-servicos.txt",
            "acme",
            COMPLETED,
            CONTRACT_SUBSCRIPTIONS,
        ),
        Case(
            "Supply agreement (PDF, confidential)",
            "supply-agreement.pdf",
            "globex",
            COMPLETED,
            CONTRACT_SUBSCRIPTIONS,
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
            label="tampered service-agreement.txt",
        ),
        Case(
            "Globex's envelope replayed as tenant acme",
            "supply-agreement.pdf",
            "acme",
            "access_denied",
            classification="confidential",
            how="forged",
            label="forged supply-agreement.pdf",
        ),
        Case(
            "Refused: a tenant the caller is not granted",
            "service-agreement.txt",
            "umbrella",
            "forbidden",
            label="tenant umbrella (not granted)",
        ),
        Case(
            "Refused: a token the issuer never signed",
            "service-agreement.txt",
            "acme",
            "unauthenticated",
            signer="foreign",
            label="foreign-signed token",
        ),
        Case(
            "Invalid envelope sent straight to the queue",
            "-",
            "-",
            "invalid_envelope",
            how="invalid",
            label="invalid envelope",
        ),
    ]
