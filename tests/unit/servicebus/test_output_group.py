"""Group commit: a connection's frames are written only after the commit; a failed commit writes
none of them, ever, and closes the connections that waited for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from servicebus_emulator.connection import AmqpConnection, OutputGroup


@dataclass
class FakeBroker:
    failing: bool = False
    commits: int = 0

    def commit(self) -> None:
        if self.failing:
            raise OSError("disk full")
        self.commits += 1


@dataclass
class FakeTransport:
    written: list[bytes] = field(default_factory=list)
    closed: bool = False

    def get_extra_info(self, name: str) -> Any:
        return None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


def _connection(broker: FakeBroker, output: OutputGroup) -> tuple[AmqpConnection, FakeTransport]:
    connection = AmqpConnection(broker, None, None, on_lost=lambda _: None, output=output)  # type: ignore[arg-type]
    transport = FakeTransport()
    connection._transport = transport  # type: ignore[assignment]
    return connection, transport


def test_frames_are_written_after_the_commit_and_a_failed_commit_writes_none() -> None:
    broker = FakeBroker()
    output = OutputGroup(broker)  # type: ignore[arg-type]
    output.flushed_before_wait = True  # flushed by hand here, as the loop's selector would
    first, first_transport = _connection(broker, output)
    second, second_transport = _connection(broker, output)

    first.send_encoded(b"ack-1")
    output.flush()
    assert (broker.commits, first_transport.written) == (1, [b"ack-1"])

    broker.failing = True
    first.send_encoded(b"ack-2")
    second.send_encoded(b"ack-3")
    with pytest.raises(OSError, match="disk full"):
        output.flush()
    assert (first_transport.written, second_transport.written) == ([b"ack-1"], [])
    assert (first_transport.closed, second_transport.closed) == (True, True)

    broker.failing = False
    first.send_encoded(b"late")  # a closed connection writes nothing more
    output.flush()
    first.flush()
    assert (first_transport.written, second_transport.written) == ([b"ack-1"], [])
