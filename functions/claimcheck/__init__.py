"""Claim Check for AI agents: the public API the Function App, the demo and the ops tools use.

Importing this package loads no Azure SDK and no PDF library; ``ClaimCheck.from_settings`` and the
adapters import them when first needed.
"""

from claimcheck.errors import (
    ClaimCheckError,
    IntakeRejected,
    MessageRejected,
    RetryableError,
    StoreError,
)
from claimcheck.messages import Bus, InboundMessage, OutboundMessage
from claimcheck.outcome import Complete, DeadLetter, DeadLetterReason, Outcome, Retry, compute_backoff
from claimcheck.policy import DEFAULT_PURPOSES, Classification, CleanupPolicy, PurposePolicy
from claimcheck.receipts import IntakeReceipt
from claimcheck.reconciler import ReconciliationReport
from claimcheck.service import ClaimCheck
from claimcheck.settings import Settings
from claimcheck.workitems import WorkItemView

__all__ = [
    "DEFAULT_PURPOSES",
    "Bus",
    "ClaimCheck",
    "ClaimCheckError",
    "Classification",
    "CleanupPolicy",
    "Complete",
    "DeadLetter",
    "DeadLetterReason",
    "InboundMessage",
    "IntakeReceipt",
    "IntakeRejected",
    "MessageRejected",
    "OutboundMessage",
    "Outcome",
    "PurposePolicy",
    "ReconciliationReport",
    "Retry",
    "RetryableError",
    "Settings",
    "StoreError",
    "WorkItemView",
    "compute_backoff",
]
