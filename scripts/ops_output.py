"""How `claimcheck-ops` prints: rich tables for people, `--json` for scripts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import typer

from scripts.ops_servicebus import MessageSummary

Row = Mapping[str, Any]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def print_json(value: Any) -> None:
    typer.echo(json.dumps(_plain(value), indent=2, sort_keys=False))


_ONE_LINE_COLUMNS = frozenset(
    {
        "sequence_number",
        "delivery_count",
        "enqueued_time",
        "state",
        "status",
        "active",
        "dead_letter",
        "scheduled",
        "oldest_age_s",
    }
)


def print_table(title: str, rows: Sequence[Row], columns: Sequence[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        # Numbers, times and states stay on one line; ids and texts fold rather than lose characters.
        table.add_column(column.replace("_", " "), overflow="fold", no_wrap=column in _ONE_LINE_COLUMNS)
    for row in rows:
        table.add_row(*("" if row.get(column) is None else str(_plain(row[column])) for column in columns))
    Console().print(table)


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested API answers as `a.b` keys, so a two-column table can show them."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat |= _flatten(item, f"{name}.")
        else:
            flat[name] = json.dumps(item) if isinstance(item, list) else item
    return flat


def print_record(title: str, record: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(record)
        return
    rows = [{"field": key, "value": value} for key, value in _flatten(record).items()]
    print_table(title, rows, ["field", "value"])


# Table columns (JSON output carries every MessageSummary field).
ACTIVE_COLUMNS = (
    "sequence_number", "message_id", "session_id", "correlation_id", "enqueued_time", "delivery_count",
    "state", "subject", "content_type",
)  # fmt: skip
DEAD_LETTER_COLUMNS = (
    "sequence_number", "message_id", "dead_letter_reason", "dead_letter_description", "delivery_count",
    "correlation_id", "enqueued_time", "session_id",
)  # fmt: skip


def print_messages(
    title: str, messages: Sequence[MessageSummary], as_json: bool, columns: Sequence[str]
) -> None:
    rows = [dataclasses.asdict(message) for message in messages]
    if as_json:
        print_json(rows)
    else:
        print_table(f"{title} ({len(rows)})", rows, columns)
