"""The removal journal: settled messages' keys appended to a file, the durable record of a
completion that came alone.

A completion must be durable before its acknowledgement is written, and the SDK completes one
message per round trip, so most commits of a receiver hold one removal and nothing else. As a
SQLite transaction that is a WAL frame of a whole page (~10-14 us of CPU); here it is one append
to a file (~2 us). Both survive a killed process the same way (the written bytes are in the
kernel's page cache; SQLite runs with synchronous=NORMAL, no fsync per commit), and neither
survives a power loss, which the emulator does not promise.

The store applies the journal in bulk with its purge (deleting the messages it names), then
empties it; at start it applies what a crash left. Re-applying is harmless: sequence numbers are
never reused within an entity, so a key names one message forever.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

# A record: the entity path's length in bytes and the sequence number, then the path (UTF-8).
_RECORD = struct.Struct(">IQ")


def encode_records(keys: list[tuple[str, int]]) -> bytes:
    parts = []
    for queue, seq in keys:
        raw = queue.encode()
        parts.append(_RECORD.pack(len(raw), seq) + raw)
    return b"".join(parts)


def decode_records(data: bytes) -> list[tuple[str, int]]:
    """Every whole record; a torn last one (the process died mid-write) is not a removal."""
    keys = []
    offset = 0
    while offset + _RECORD.size <= len(data):
        size, seq = _RECORD.unpack_from(data, offset)
        start = offset + _RECORD.size
        if start + size > len(data):
            break
        keys.append((data[start : start + size].decode(errors="replace"), seq))
        offset = start + size
    return keys


class RemovalJournal:
    """Appends removals to ``path`` (``None``: in memory only, for an in-memory store) and keeps
    the keys journaled since the last ``clear`` in ``pending``, the store's purge to-do list."""

    def __init__(self, path: Path | None) -> None:
        self._fd: int | None = None
        self.pending: list[tuple[str, int]] = []
        if path is not None:
            if path.exists():
                self.pending = decode_records(path.read_bytes())
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(self, keys: list[tuple[str, int]]) -> None:
        """Make the removal of ``keys`` durable: one write() of all their records."""
        if self._fd is not None:
            data = memoryview(encode_records(keys))
            while data:  # a regular file takes it all at once unless the disk is full (raises)
                data = data[os.write(self._fd, data) :]
        self.pending += keys

    def clear(self) -> None:
        """The pending removals were applied (committed) elsewhere: forget them."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # O_APPEND: the next record goes to the new end
        self.pending = []

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
