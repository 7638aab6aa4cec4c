"""The removal journal: settled messages' keys recorded in a file, the durable record of a
completion that came alone.

A completion must be durable before its acknowledgement is written, and the SDK completes one
message per round trip, so most commits of a receiver hold one removal and nothing else. As a
SQLite transaction that is a WAL frame of a whole page (~10-14 us of CPU); a ``write()`` to a file
is ~2 us of Python and 3-5 us of the kernel's write path; here it is a copy into a shared
memory map of the file (no system call). All three survive a killed process the same way (the
bytes are in the kernel's page cache once written; SQLite runs with synchronous=NORMAL, no fsync
per commit), and none survives a power loss, which the emulator does not promise.

The file (``removals.map``) is allocated ahead and zero-filled (``posix_fallocate``, or zeros
written where the OS lacks it): a full disk fails the commit with an OSError when the file grows,
never a SIGBUS on a write to the map. A record is its key (``_RECORD`` + path) then one marker
byte, 1, stored after the rest: a record counts only once its marker is there, and reading stops
at the first one without (a record torn by a kill, or the zeros after the last). The store
applies the journal in bulk with its purge (deleting the messages it names), then empties it
(zeroes what was used); at start it applies what a crash left. Re-applying is harmless:
sequence numbers are never reused within an entity, so a key names one message forever.
``removed.journal``, the appended file of earlier versions (records without markers), is applied
at start too and then deleted.
"""

from __future__ import annotations

import mmap
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


def decode_marked(data: bytes | mmap.mmap) -> tuple[list[tuple[str, int]], int]:
    """The records of a mapped journal up to the first without its marker, and where they end."""
    keys = []
    offset = 0
    size = len(data)
    while offset + _RECORD.size < size:
        length, seq = _RECORD.unpack_from(data, offset)
        start = offset + _RECORD.size
        marker = start + length
        if marker >= size or data[marker] != _MARKER:
            break
        keys.append((bytes(data[start:marker]).decode(errors="replace"), seq))
        offset = marker + 1
    return keys, offset


_MARKER = 1
_MAP_BYTES = 1 << 20  # ~30,000 records; the purge empties it at least once a second
LEGACY_NAME = "removed.journal"


def _allocate(fd: int, size: int) -> None:
    """Give the file ``size`` bytes of zeros with their disk blocks allocated (an OSError now if
    the disk is full): ``posix_fallocate`` where the OS has it, else the zeros written (macOS)."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        fallocate(fd, 0, size)
        return
    current = os.fstat(fd).st_size
    os.lseek(fd, current, os.SEEK_SET)
    zeros = memoryview(bytes(size - current))
    while zeros:
        zeros = zeros[os.write(fd, zeros) :]


class RemovalJournal:
    """Records removals in the mapped file ``path`` (``None``: in memory only, for an in-memory
    store) and keeps the keys journaled since the last ``clear`` in ``pending``, the store's purge
    to-do list."""

    def __init__(self, path: Path | None) -> None:
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._end = 0  # where the next record goes
        self._legacy: Path | None = None
        self.pending: list[tuple[str, int]] = []
        if path is None:
            return
        legacy = path.with_name(LEGACY_NAME)
        if legacy.exists():
            self.pending = decode_records(legacy.read_bytes())
            self._legacy = legacy
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        size = os.fstat(self._fd).st_size
        if size:
            self._map = mmap.mmap(self._fd, size)
            keys, self._end = decode_marked(self._map)
            self.pending += keys
            if self._map[self._end :].strip(b"\0"):  # a torn record (or a half-done clear) after them
                self._map[self._end :] = bytes(size - self._end)  # appends expect zeros past the end
        else:
            self._grow(_MAP_BYTES)

    def _grow(self, size: int) -> None:
        """Allocate the file to ``size`` bytes (zeros) and map it all."""
        assert self._fd is not None
        _allocate(self._fd, size)  # blocks reserved now: no SIGBUS on a full disk later
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(self._fd, size)

    def append(self, keys: list[tuple[str, int]]) -> None:
        """Make the removal of ``keys`` durable: each record copied into the map, its marker last."""
        if self._map is not None:
            for queue, seq in keys:
                raw = queue.encode()
                record = _RECORD.pack(len(raw), seq) + raw
                end = self._end + len(record)
                if end >= len(self._map):
                    self._grow(max(2 * len(self._map), end + _MAP_BYTES))
                self._map[self._end : end] = record
                self._map[end] = _MARKER  # the record counts from this store on
                self._end = end + 1
        self.pending += keys

    def clear(self) -> None:
        """The pending removals were applied (committed) elsewhere: forget them."""
        if self._map is not None:
            self._map[: self._end] = bytes(self._end)  # a crash half-way re-applies some: harmless
            self._end = 0
        if self._legacy is not None:
            self._legacy.unlink(missing_ok=True)
            self._legacy = None
        self.pending = []

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
