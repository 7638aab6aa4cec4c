"""Test doubles shipped with the package (like ``structlog.testing``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from claimcheck.messages import OutboundMessage


class PublishFailed(ConnectionError):
    """Raised by ``InMemoryBus`` when told to fail: the broker did not confirm."""


@dataclass
class InMemoryBus:
    """A ``Bus`` that records what was published, per destination, in order.

    ``fail_next`` makes the next N publishes raise ``PublishFailed`` (a lost publish). There is no
    duplicate detection, so tests see every publish the code makes.
    """

    fail_next: int = 0
    published: dict[str, list[OutboundMessage]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def publish(self, destination: str, message: OutboundMessage) -> None:
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PublishFailed(f"simulated: {destination} did not confirm")
            self.published.setdefault(destination, []).append(message)

    def messages(self, destination: str) -> list[OutboundMessage]:
        with self._lock:
            return list(self.published.get(destination, []))
