"""The result of one analysis: its summary, its row in the results table and its event on the topic.

The event carries routing values as application properties (tenant, purpose, priority,
document_type, review_required) so that subscriptions filter without parsing JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from claimcheck.analysis import AnalysisResult
from claimcheck.envelope import Envelope
from claimcheck.messages import ApplicationValue, OutboundMessage
from claimcheck.storage import Key
from claimcheck.timestamps import format_timestamp

RESULT_SCHEMA = "claimcheck.result/1"
_PART_CHARS = 30_000  # under the 32 K-character limit of one table string property


def result_summary(envelope: Envelope, analysis: AnalysisResult, *, completed_at: datetime) -> dict[str, Any]:
    """What the status API and the idempotency ledger keep: counts and routing values, no text."""
    return {
        "work_item_id": envelope.work_item_id,
        "version": envelope.payload_version,
        "document_type": analysis.document_type,
        "priority": analysis.priority,
        "review_required": analysis.review_required,
        "parties": len(analysis.parties),
        "obligations": len(analysis.obligations),
        "page_count": analysis.page_count,
        "completed_at": format_timestamp(completed_at),
    }


def result_key(envelope: Envelope) -> Key:
    """One row per (work item, version)."""
    return Key(envelope.work_item_id, result_row_key(envelope.payload_version))


def result_row(
    envelope: Envelope, analysis: AnalysisResult, summary: Mapping[str, Any], *, completed_at: datetime
) -> dict[str, Any]:
    """The row under ``result_key``: the key makes a second insert fail instead of duplicating.

    A table string property holds at most 64 KiB (32 K UTF-16 characters) while a full result (200
    obligations of 300 characters) exceeds that, so the result JSON is split over ``result_NN``
    properties; ``result_parts`` says how many. ``read_result`` joins them.
    """
    text = json.dumps(analysis.to_dict(), sort_keys=True)
    parts = [text[start : start + _PART_CHARS] for start in range(0, len(text), _PART_CHARS)] or [""]
    return {
        "tenant_id": envelope.tenant_id,
        "purpose": envelope.purpose,
        "completed_at": completed_at,
        "summary": json.dumps(summary, sort_keys=True),
        "result_parts": len(parts),
        **{f"result_{index:02d}": part for index, part in enumerate(parts)},
    }


def result_row_key(version: int) -> str:
    """The row of one version in the work item's partition of the results table."""
    return f"v{version:010d}"


def read_result(row: Mapping[str, Any]) -> dict[str, Any]:
    """The full analysis result stored by ``result_row``."""
    text = "".join(row[f"result_{index:02d}"] for index in range(int(row["result_parts"])))
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def result_event(
    envelope: Envelope,
    analysis: AnalysisResult,
    summary: Mapping[str, Any],
    *,
    message_id: str,
    traceparent: str | None,
) -> OutboundMessage:
    properties: dict[str, ApplicationValue] = {
        "tenant": envelope.tenant_id,
        "purpose": envelope.purpose,
        "priority": analysis.priority,
        "document_type": analysis.document_type,
        "review_required": analysis.review_required,
        "schema": RESULT_SCHEMA,
    }
    if traceparent is not None:
        properties["traceparent"] = traceparent
    body = {
        "schema": RESULT_SCHEMA,
        "tenant_id": envelope.tenant_id,
        "purpose": envelope.purpose,
        "summary": dict(summary),
        "result": analysis.to_dict(),
    }
    return OutboundMessage(
        body=json.dumps(body, sort_keys=True).encode(),
        message_id=message_id,
        content_type="application/json",
        session_id=None,
        correlation_id=envelope.correlation_id,
        subject="analysis-result",
        application_properties=properties,
        time_to_live=None,
    )
