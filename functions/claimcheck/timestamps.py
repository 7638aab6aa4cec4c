"""The one textual form of a moment in envelopes, receipts, status answers and logs."""

from __future__ import annotations

from datetime import UTC, datetime


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z`` (``2026-12-01T08:00:00.000Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
