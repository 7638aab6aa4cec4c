"""Read entity counts from an emulator's SQLite store, from any process, while it runs.

    python -m local.servicebus.stats --data DIR [ENTITY ...]

Prints one JSON object per entity: active, scheduled, deferred and dead-lettered message counts
and the age of the oldest active message. It opens the database read-only (WAL lets it read while
the emulator writes). An in-process emulator answers the same question with
``RunningEmulator.runtime_properties(entity)``; locks are not persisted, so only that one reports
locked messages.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from local.servicebus.model import ACTIVE, DEFERRED, SCHEDULED

_DEAD_LETTER = "/$deadletterqueue"


def read_counts(data_dir: Path, entities: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Counts per entity path (lower-case), for the given entities or every entity with messages."""
    database = data_dir / "servicebus.sqlite"
    if not database.exists():
        raise FileNotFoundError(f"no emulator store at {database}")
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT queue, state, COUNT(*), MIN(enqueued_ms) FROM messages GROUP BY queue, state"
        ).fetchall()
    finally:
        connection.close()
    by_queue: dict[str, dict[int, tuple[int, int]]] = {}
    for queue, state, count, oldest in rows:
        by_queue.setdefault(queue, {})[state] = (count, oldest)
    names = (
        [name.lower() for name in entities]
        if entities
        else sorted(
            {queue.removesuffix(_DEAD_LETTER) for queue in by_queue if not queue.endswith("/$scheduled")}
        )
    )
    now_ms = int(time.time() * 1000)
    result = {}
    for name in names:
        states = by_queue.get(name, {})
        dead = sum(count for count, _ in by_queue.get(name + _DEAD_LETTER, {}).values())
        active, oldest = states.get(ACTIVE, (0, None))
        result[name] = {
            "active_message_count": active,
            "scheduled_message_count": states.get(SCHEDULED, (0, None))[0],
            "deferred_message_count": states.get(DEFERRED, (0, None))[0],
            "dead_letter_message_count": dead,
            "oldest_message_age_seconds": None if oldest is None else (now_ms - oldest) / 1000,
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.servicebus.stats",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, required=True, help="the emulator's --data directory")
    parser.add_argument("entities", nargs="*", help="queue or topic/Subscriptions/name (default: all)")
    args = parser.parse_args(argv)
    for name, counts in read_counts(args.data, args.entities or None).items():
        print(json.dumps({"entity": name, **counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
