"""Helpers for the analyzer tests: sample paths, one-call analysis, and a generated large stream."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from claimcheck.analysis import ContractObligationExtractor

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "contracts"


def analyze_bytes(data: bytes, content_type: str = "text/plain") -> dict[str, Any]:
    return ContractObligationExtractor().analyze(io.BytesIO(data), content_type).to_dict()


def analyze_sample(name: str) -> dict[str, Any]:
    content_type = "application/pdf" if name.endswith(".pdf") else "text/plain"
    with (SAMPLES / name).open("rb") as document:
        return ContractObligationExtractor().analyze(document, content_type).to_dict()


class RepeatedTextStream(io.RawIOBase):
    """`size` bytes made of `block` repeated; remembers the largest read it was asked for."""

    def __init__(self, block: bytes, size: int) -> None:
        self._block = block
        self._size = size
        self._position = 0
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self._size - self._position)
        self.largest_read = max(self.largest_read, len(buffer))
        start = self._position % len(self._block)
        repeats = (start + wanted) // len(self._block) + 1
        data = (self._block * repeats)[start : start + wanted]
        buffer[:wanted] = data
        self._position += wanted
        return wanted
