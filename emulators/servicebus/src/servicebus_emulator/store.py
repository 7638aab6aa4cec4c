"""SQLite persistence: messages, session state, duplicate-detection history, sequence numbers.

Writes are queued and applied as one transaction when the broker commits, before it acknowledges
anything to a client (group commit), so a crash loses nothing that was acknowledged. Runs of the
same statement go to SQLite as one ``executemany`` and a lone statement commits by itself, so a
batch of sends costs one or two calls into SQLite. Removals (completions) that come alone go to
the removal journal instead (``journal``: a record copied into a mapped file); with other writes
they are rows of the same transaction. WAL mode with synchronous=NORMAL survives a killed
process; ``--in-memory`` uses SQLite's ``:memory:`` database, so tests exercise the same code.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from servicebus_emulator.journal import RemovalJournal
from servicebus_emulator.message import AmqpMessage
from servicebus_emulator.model import Entry

# An entry's changing fields and its message bytes live in two tables: a lock or an abandon
# rewrites a small row, not the message (which, past ~1 KB, also spans an overflow page).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    queue TEXT NOT NULL, seq INTEGER NOT NULL, state INTEGER NOT NULL, delivery_count INTEGER NOT NULL,
    enqueued_ms INTEGER NOT NULL, expires_ms INTEGER, scheduled_ms INTEGER, session_id TEXT,
    dead_letter_source TEXT, PRIMARY KEY (queue, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bodies (
    queue TEXT NOT NULL, seq INTEGER NOT NULL, raw BLOB NOT NULL, PRIMARY KEY (queue, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_states (
    queue TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL, PRIMARY KEY (queue, session_id));
CREATE TABLE IF NOT EXISTS duplicates (
    entity TEXT NOT NULL, message_id TEXT NOT NULL, expires_ms INTEGER NOT NULL,
    PRIMARY KEY (entity, message_id));
CREATE TABLE IF NOT EXISTS sequences (queue TEXT PRIMARY KEY, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS removed (queue TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS managed (path TEXT PRIMARY KEY, position INTEGER NOT NULL, document TEXT NOT NULL);
"""
# The tables whose rows belong to one entity path (a deleted entity's rows go with it).
_ENTITY_TABLES = (
    ("entries", "queue"),
    ("bodies", "queue"),
    ("session_states", "queue"),
    ("sequences", "queue"),
    ("duplicates", "entity"),
)


# Before the split, one table held both (data directories of earlier versions are moved over).
_MIGRATE = (
    "INSERT OR IGNORE INTO entries SELECT queue, seq, state, delivery_count, enqueued_ms, expires_ms, "
    "scheduled_ms, session_id, dead_letter_source FROM messages",
    "INSERT OR IGNORE INTO bodies SELECT queue, seq, raw FROM messages",
    "DROP TABLE messages",
)
_PUT_ENTRY = (
    "INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (queue, seq) DO UPDATE SET "
    "state=excluded.state, delivery_count=excluded.delivery_count, scheduled_ms=excluded.scheduled_ms"
)
_PUT_BODY = "INSERT OR REPLACE INTO bodies VALUES (?,?,?)"
_UPDATE = "UPDATE entries SET state=?, delivery_count=?, scheduled_ms=? WHERE queue=? AND seq=?"
# A settled message is not deleted at once: a record in the removal journal, or a row appended to
# ``removed`` in a transaction with other writes (several times cheaper than a delete) says it is
# gone, and ``purge_removed`` deletes the messages they name in bulk, off the acknowledgement path.
_REMOVE = "INSERT INTO removed VALUES (?,?)"
# Settled messages are mostly consecutive (FIFO): each run of sequence numbers is deleted as one
# range, a walk along the leaves instead of a seek per row.
_REMOVED = "SELECT queue, seq FROM removed"
_PURGE_RUNS = (
    "DELETE FROM entries WHERE queue=? AND seq BETWEEN ? AND ?",
    "DELETE FROM bodies WHERE queue=? AND seq BETWEEN ? AND ?",
)
_FORGET_REMOVED = "DELETE FROM removed"
_SAVE_SEQ = "INSERT OR REPLACE INTO sequences VALUES (?,?)"
_DROP_STATE = "DELETE FROM session_states WHERE queue=? AND session_id=?"
_SAVE_STATE = "INSERT OR REPLACE INTO session_states VALUES (?,?,?)"
_REMEMBER_ID = "INSERT OR REPLACE INTO duplicates VALUES (?,?,?)"
_FORGET_IDS = "DELETE FROM duplicates WHERE expires_ms <= ?"


def consecutive_runs(keys: Iterable[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """Sorted (queue, seq) keys as (queue, first, last) runs of consecutive sequence numbers."""
    runs: list[tuple[str, int, int]] = []
    for queue, seq in keys:
        if runs and runs[-1][0] == queue and seq - 1 <= runs[-1][2]:
            runs[-1] = (queue, runs[-1][1], max(seq, runs[-1][2]))  # adjacent, or a duplicate row
        else:
            runs.append((queue, seq, seq))
    return runs


class Store:
    """The broker's only persistence; one instance per broker, used from the broker's loop only."""

    def __init__(self, data_dir: Path | None) -> None:
        if data_dir is None:
            target = ":memory:"
        else:
            data_dir.mkdir(parents=True, exist_ok=True)
            target = str(data_dir / "servicebus.sqlite")
        self._journal = RemovalJournal(None if data_dir is None else data_dir / "removals.map")
        self._removals: list[tuple[str, int]] = []  # since the last commit
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        # Before WAL mode, and in a new file only: 8 KiB pages keep a message of up to ~2 KB inside its
        # b-tree page (with 4 KiB pages one past ~1 KB gets an overflow page of its own, written
        # on every send and freed on every purge); existing data directories keep their size.
        self._db.execute("PRAGMA page_size=8192")
        # Some builds (Debian's) zero every deleted byte, which more than doubled the purge; FAST
        # still zeroes what costs no extra I/O. The data is the emulator's own local file.
        self._db.execute("PRAGMA secure_delete=FAST")
        if data_dir is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # Only this process opens the file: no file locks taken per transaction (~40 % of a commit).
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
        self._db.executescript(_SCHEMA)
        self._pending: list[tuple[str, list[tuple[object, ...]]]] = []
        self._recording = True
        # A new entry's message bytes, written with the entries of the same commit (see commit).
        self._bodies: list[tuple[object, ...]] = []
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE name='messages'").fetchone():
            self._transaction(_MIGRATE)
        self.removed_backlog = 1  # unknown after a restart: purge (and apply the journal) before reading
        self.purge_removed()

    def _write(self, sql: str, params: tuple[object, ...]) -> None:
        if self._pending and self._pending[-1][0] is sql:  # the statements are module constants
            self._pending[-1][1].append(params)
        else:
            self._pending.append((sql, [params]))

    def commit(self) -> None:
        """Make every write so far durable (called before acknowledging them)."""
        if self._removals:
            removals, self._removals = self._removals, []
            if not self._pending:
                self._journal.append(removals)  # alone: one append, no transaction
                return
            self._pending.append((_REMOVE, list(removals)))  # atomic with the rest (a dead-letter move)
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        bodies, self._bodies = self._bodies, []
        if len(pending) == 1 and len(pending[0][1]) == 1 and not bodies:
            sql, (params,) = pending[0]
            self._db.execute(sql, params)  # autocommit: one statement is its own transaction
            return
        self._db.execute("BEGIN")
        try:
            # Bodies first: only a body nothing refers to yet can exist without its entry.
            if bodies:
                self._db.executemany(_PUT_BODY, bodies)
            for sql, rows in pending:
                self._db.executemany(sql, rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _transaction(self, statements: tuple[str, ...]) -> None:
        self._db.execute("BEGIN")
        try:
            for sql in statements:
                self._db.execute(sql)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def purge_removed(self) -> None:
        """Delete the messages recorded as removed (one transaction; called by the broker's timer)."""
        if not self.removed_backlog:
            return
        self.commit()
        runs = consecutive_runs(sorted([*self._db.execute(_REMOVED), *self._journal.pending]))
        self._db.execute("BEGIN")
        try:
            for sql in _PURGE_RUNS:
                self._db.executemany(sql, runs)
            self._db.execute(_FORGET_REMOVED)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._journal.clear()  # only now: a crash before this applies the journal again, harmlessly
        self.removed_backlog = 0

    # --- entities of the management plane (see managed.py) --------------------------------------

    def managed_changes(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT document FROM managed ORDER BY position")
        return [json.loads(document) for (document,) in rows]

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """While the broker replays stored changes: record nothing again."""
        self._recording = False
        try:
            yield
        finally:
            self._recording = True

    def record_entity(self, path: str, document: dict[str, Any]) -> None:
        """Store an entity's new state, durably, keeping its place in the order of first changes."""
        if self._recording:
            self._managed_transaction(
                (
                    "INSERT INTO managed VALUES (?, (SELECT COALESCE(MAX(position), 0) + 1 FROM managed), ?) "
                    "ON CONFLICT (path) DO UPDATE SET document=excluded.document",
                    (path, json.dumps(document)),
                ),
            )

    def record_deletion(self, path: str, document: dict[str, Any]) -> None:
        """Store that an entity (and so everything under it) is gone: a tombstone, last in order."""
        if self._recording:
            tombstone = json.dumps({**document, "deleted": True})
            self._managed_transaction(
                (
                    "DELETE FROM managed WHERE path=? OR substr(path, 1, ?)=?",
                    (path, len(path) + 1, path + "/"),
                ),
                (
                    "INSERT INTO managed VALUES (?, (SELECT COALESCE(MAX(position), 0) + 1 FROM managed), ?)",
                    (path, tombstone),
                ),
            )

    def drop_entity(self, path: str) -> None:
        """Delete every stored row of ``path`` and of the entities under it (its dead-letter queue,
        a topic's subscriptions): messages, sequence numbers, session states, duplicate history.
        Pending removals are applied first, so none can later hit a new entity of the same name."""
        self.removed_backlog += 1
        self.purge_removed()
        statements = []
        for table, column in _ENTITY_TABLES:
            where = f"{column}=? OR substr({column}, 1, ?)=?"
            statements.append((f"DELETE FROM {table} WHERE {where}", (path, len(path) + 1, path + "/")))  # noqa: S608 - constant names
        self._managed_transaction(*statements)

    def _managed_transaction(self, *statements: tuple[str, tuple[object, ...]]) -> None:
        self.commit()
        self._db.execute("BEGIN")
        try:
            for sql, params in statements:
                self._db.execute(sql, params)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self.commit()
        self.purge_removed()
        self._db.close()
        self._journal.close()

    # --- messages --------------------------------------------------------------------------------

    def put(self, queue: str, entry: Entry) -> None:
        self._bodies.append((queue, entry.seq, entry.message.encode()))
        self._write(
            _PUT_ENTRY,
            (
                queue,
                entry.seq,
                entry.state,
                entry.delivery_count,
                entry.enqueued_ms,
                entry.expires_ms,
                entry.scheduled_ms,
                entry.session_id,
                entry.dead_letter_source,
            ),
        )

    def update(self, queue: str, entry: Entry) -> None:
        """Store the changing fields of an entry already stored (its message bytes never change)."""
        self._write(_UPDATE, (entry.state, entry.delivery_count, entry.scheduled_ms, queue, entry.seq))

    def remove(self, queue: str, seq: int) -> None:
        self._removals.append((queue, seq))
        self.removed_backlog += 1

    def entries(self, queue: str) -> Iterator[Entry]:
        rows = self._db.execute(
            "SELECT seq, state, delivery_count, enqueued_ms, expires_ms, scheduled_ms, session_id, "
            "dead_letter_source, raw FROM entries JOIN bodies USING (queue, seq) WHERE queue=? ORDER BY seq",
            (queue,),
        )
        for seq, state, count, enqueued, expires, scheduled, session_id, source, raw in rows:
            yield Entry(
                seq=seq,
                message=AmqpMessage.parse(raw),
                enqueued_ms=enqueued,
                expires_ms=expires,
                state=state,
                scheduled_ms=scheduled,
                delivery_count=count,
                session_id=session_id,
                dead_letter_source=source,
            )

    def save_next_seq(self, queue: str, next_seq: int) -> None:
        self._write(_SAVE_SEQ, (queue, next_seq))

    def next_seq(self, queue: str) -> int:
        row = self._db.execute("SELECT next_seq FROM sequences WHERE queue=?", (queue,)).fetchone()
        return int(row[0]) if row else 1

    # --- sessions and duplicates -----------------------------------------------------------------

    def save_session_state(self, queue: str, session_id: str, state: bytes | None) -> None:
        if state is None:
            self._write(_DROP_STATE, (queue, session_id))
        else:
            self._write(_SAVE_STATE, (queue, session_id, state))

    def session_states(self, queue: str) -> dict[str, bytes]:
        rows = self._db.execute("SELECT session_id, state FROM session_states WHERE queue=?", (queue,))
        return {session_id: bytes(state) for session_id, state in rows}

    def remember_message_id(self, entity: str, message_id: str, expires_ms: int) -> None:
        self._write(_REMEMBER_ID, (entity, message_id, expires_ms))

    def forget_message_ids(self, now_ms: int) -> None:
        """Drop duplicate-detection history whose window has passed."""
        self._write(_FORGET_IDS, (now_ms,))

    def message_ids(self, entity: str) -> dict[str, int]:
        rows = self._db.execute("SELECT message_id, expires_ms FROM duplicates WHERE entity=?", (entity,))
        return dict(rows.fetchall())
