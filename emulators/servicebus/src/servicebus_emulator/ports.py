"""The small interfaces the AMQP side's parts talk through, so that none reaches into another:
a link asks its session (``LinkSession``), a session its connection (``SessionHost``).

A leaf module: it imports nothing of the emulator.
"""

from __future__ import annotations

from typing import Any, Protocol


class LinkIdentity(Protocol):
    """What a session needs to know of a link to forget it."""

    @property
    def handle(self) -> int: ...

    @property
    def remote_handle(self) -> int: ...


class LinkSession(Protocol):
    """What a link asks of its AMQP session: frames out, delivery ids, settlement of what it received."""

    @property
    def remote_incoming_window(self) -> int: ...

    def send(self, body: Any, payload: bytes = b"") -> None: ...

    def send_disposition(self, delivery_id: int, state: bytes) -> None:
        """Settle a delivery the broker sent; ``state`` is the encoded outcome."""
        ...

    def send_flow(
        self, handle: int, *, delivery_count: int, link_credit: int, drain: bool = False
    ) -> None: ...

    def transfer(self, handle: int, tag: bytes, payload: bytes, *, settled: bool) -> int:
        """Send one delivery; return its delivery id."""
        ...

    def settle_incoming(self, delivery_id: int, outcome: Any) -> None: ...

    def forget(self, link: LinkIdentity) -> None: ...


class SessionHost(Protocol):
    """What a session asks of its connection."""

    @property
    def remote_max_frame_size(self) -> int: ...

    def send_frame(self, channel: int, body: Any, payload: bytes = b"") -> None: ...

    def send_encoded(self, frame: bytes) -> None:
        """Queue a frame already encoded (see ``fastframes``)."""
        ...

    def schedule_flush(self) -> None: ...

    def end_session(self, channel: int) -> None: ...
