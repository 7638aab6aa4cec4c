"""How `claimcheck-ops` prints: tables or records for people, `--json` for scripts.

Every view fits the console's width (the terminal's, else $COLUMNS, else Rich's 80): a table when its
columns fit whole, else without the columns marked optional, else one record per row (field names on
the left, values beside them or, when too long, on their own lines). Ids, numbers, times and names are
never folded or cut, so what a user copies (a message id, a sequence number) is always whole; only
free text (a dead-letter description, a detail) wraps at spaces. `--json` carries every field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer

from scripts.ops_servicebus import MessageSummary

if TYPE_CHECKING:
    from rich.console import Console

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    """One field of a view. ``text``: free text that may wrap at spaces (everything else is kept
    whole); ``optional``: left out of the table when the console is too narrow for it (the record
    layout and --json still show it)."""

    key: str
    header: str | None = None
    text: bool = False
    optional: bool = False

    @property
    def title(self) -> str:
        return self.header or self.key.replace("_", " ")


# A free-text column is given at least this many characters before the table gives way to records.
_TEXT_MIN_WIDTH = 24
# Field names and values in the record layout.
_RECORD_GAP = 2
_RECORD_INDENT = 4
_NAME_WIDTH = 24


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


def make_console() -> Console:
    """The terminal's width on a terminal; $COLUMNS or 80 otherwise (Rich's own rule)."""
    from rich.console import Console

    return Console(highlight=False)


def _cell(row: Row, key: str) -> str:
    value = row.get(key)
    return "" if value is None else str(_plain(value))


def _table_width(columns: Sequence[Column], rows: Sequence[Row]) -> int:
    """The width a table needs with its whole columns unbroken and its text columns at their minimum
    (the SIMPLE_HEAD box without edges: a divider and a space of padding each side between columns)."""
    widths = []
    for column in columns:
        longest = max([len(column.title), *(len(_cell(row, column.key)) for row in rows)])
        widths.append(min(longest, _TEXT_MIN_WIDTH) if column.text else longest)
    return sum(widths) + 3 * (len(columns) - 1)


def print_table(
    title: str,
    rows: Sequence[Row],
    columns: Sequence[Column | str],
    *,
    console: Console | None = None,
) -> None:
    """``rows`` as a table if it fits the console, else as records (see the module docstring)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console = console or make_console()
    wanted = [column if isinstance(column, Column) else Column(column) for column in columns]
    shown = wanted
    if _table_width(shown, rows) > console.width:
        shown = [column for column in wanted if not column.optional]
    if not rows or _table_width(shown, rows) > console.width:
        _print_records(console, title, rows, wanted)
        return
    table = Table(
        title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    for column in shown:
        if column.text:
            table.add_column(column.title, min_width=_TEXT_MIN_WIDTH, overflow="fold")
        else:
            table.add_column(column.title, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(_cell(row, column.key)) for column in shown))
    console.print(table)
    left_out = len(wanted) - len(shown)
    if left_out:
        console.print(
            f"({left_out} column(s) left out at this width: a wider terminal or --json shows them)",
            markup=False,
        )


def _print_records(console: Console, title: str, rows: Sequence[Row], columns: Sequence[Column]) -> None:
    """One block per row: the first field as its heading, then the others as `name  value` lines."""
    from rich.text import Text

    console.print(Text(title, style="italic"))
    if not rows:
        console.print("(none)")
        return
    first, *rest = columns
    for row in rows:
        console.print()
        console.print(Text(f"{first.title} {_cell(row, first.key)}", style="bold"))
        _print_fields(console, [(column.title, _cell(row, column.key)) for column in rest])


def _print_fields(console: Console, fields: Sequence[tuple[str, str]]) -> None:
    """`name  value` lines, the values aligned; a value too long for the space beside the names goes
    on its own indented line(s) instead, wrapped at spaces, so an id of up to the width less the
    indent stays on one line. Empty values are left out."""
    from rich.padding import Padding
    from rich.text import Text

    fields = [(name, value) for name, value in fields if value]
    # Aligned at the longest name up to _NAME_WIDTH: a longer name (a.b.c of a nested answer) takes
    # its own line rather than push every value right.
    name_width = min(max((len(name) for name, _ in fields), default=0), _NAME_WIDTH)
    beside = console.width - name_width - _RECORD_GAP
    for name, value in fields:
        if len(name) <= name_width and len(value) <= beside and "\n" not in value:
            console.print(Text(f"{name:<{name_width}}{' ' * _RECORD_GAP}{value}"))
        else:
            console.print(Text(name))
            console.print(Padding(Text(value, overflow="fold"), (0, 0, 0, _RECORD_INDENT)))


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested API answers as `a.b` keys, so a two-column view can show them."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat |= _flatten(item, f"{name}.")
        else:
            flat[name] = json.dumps(item) if isinstance(item, list) else item
    return flat


def print_record(
    title: str, record: Mapping[str, Any], as_json: bool, *, console: Console | None = None
) -> None:
    """One object as `field  value` lines (long values on their own lines), or JSON."""
    if as_json:
        print_json(record)
        return
    from rich.text import Text

    console = console or make_console()
    console.print(Text(title, style="italic"))
    _print_fields(console, [(key, _cell({"v": value}, "v")) for key, value in _flatten(record).items()])


# What the message views show (JSON output carries every MessageSummary field).
ACTIVE_COLUMNS = (
    Column("sequence_number", "seq"),
    Column("message_id"),
    Column("session_id"),
    Column("correlation_id", optional=True),
    Column("enqueued_time", "enqueued"),
    Column("delivery_count", "deliveries"),
    Column("state"),
    Column("subject", optional=True),
    Column("content_type", optional=True),
)
DEAD_LETTER_COLUMNS = (
    Column("sequence_number", "seq"),
    Column("message_id"),
    Column("dead_letter_reason", "reason"),
    Column("dead_letter_description", "description", text=True),
    Column("delivery_count", "deliveries"),
    Column("session_id"),
    Column("correlation_id", optional=True),
    Column("enqueued_time", "enqueued", optional=True),
)

STATS_COLUMNS = (
    Column("entity"),
    Column("active"),
    Column("dead_letter", "dead letter"),
    Column("scheduled"),
    Column("detail", optional=True),
)


def print_messages(
    title: str,
    messages: Sequence[MessageSummary],
    as_json: bool,
    columns: Sequence[Column],
    *,
    console: Console | None = None,
) -> None:
    rows = [dataclasses.asdict(message) for message in messages]
    if as_json:
        print_json(rows)
    else:
        print_table(f"{title} ({len(rows)})", rows, columns, console=console)
