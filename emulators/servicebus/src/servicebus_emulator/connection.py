"""One client connection: protocol headers, SASL, open/close, sessions, frame routing, output.

Outgoing frames are buffered and written once per loop iteration, after the broker committed
what they acknowledge (group commit); TCP_NODELAY is set so nothing waits for Nagle.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import socket
from collections.abc import Callable
from typing import Any

from servicebus_emulator.amqp_types import Array, Symbol, UInt, UShort
from servicebus_emulator.attach import Attacher
from servicebus_emulator.broker import Broker
from servicebus_emulator.cbs import Authorization, SharedAccessKey
from servicebus_emulator.fastframes import accepted_disposition
from servicebus_emulator.frames import (
    AMQP_HEADER,
    EMPTY_FRAME,
    FRAME_AMQP,
    FRAME_HEADER,
    FRAME_SASL,
    SASL_HEADER,
    FrameError,
    composite,
    encode_frame,
    error,
    parse_frame_body,
)
from servicebus_emulator.links import Replies
from servicebus_emulator.management import Management
from servicebus_emulator.session import SESSION_WINDOW, Session

_LOG = logging.getLogger(__name__)
MAX_FRAME_SIZE = 64 * 1024
_PERFORMATIVES = frozenset(
    {"open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close"}
)
_SASL_FRAMES = frozenset({"sasl_init"})  # what a client may send (no SASL challenges here)


class OutputGroup:
    """Group commit across connections: every connection with output in this loop iteration is
    flushed at once: the broker's writes are committed once, then each connection's frames are
    written (never an acknowledgement before the commit that makes it true).

    On a loop made by ``event_loop`` the flush runs just before the loop waits for I/O, at the end
    of the iteration that produced the output; elsewhere a ``call_soon`` callback runs it, which
    costs a second loop iteration (and ``epoll_wait``) per request/response round trip."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._waiting: dict[AmqpConnection, None] = {}  # insertion-ordered set
        self.flushed_before_wait = False  # set by the selector of ``event_loop``

    def schedule(self, connection: AmqpConnection) -> None:
        if not self._waiting and not self.flushed_before_wait:
            asyncio.get_running_loop().call_soon(self.flush)
        self._waiting[connection] = None

    def flush(self) -> None:
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, {}
        for connection in waiting:
            connection.prepare_output()
        try:
            self.broker.commit()
        except Exception:
            for connection in waiting:
                connection.abandon_output()
            raise
        for connection in waiting:
            connection.write_output()


class _FlushBeforeWait(selectors.DefaultSelector):
    """The loop's selector, flushing the output group first: asyncio calls ``select`` once per
    iteration, after running every callback that was ready."""

    def __init__(self, output: OutputGroup) -> None:
        super().__init__()
        self._output = output
        output.flushed_before_wait = True

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        try:
            self._output.flush()
        except Exception:
            # As a failing callback would be: logged, and the loop goes on. A callback that the
            # flush made ready (a connection lost while writing) runs at the next wake-up, at the
            # latest the server's next tick.
            _LOG.exception("flushing the connections' output failed")
        return super().select(timeout)


def event_loop(output: OutputGroup) -> asyncio.AbstractEventLoop:
    """An event loop that flushes ``output`` at the end of each iteration (see ``OutputGroup``)."""
    return asyncio.SelectorEventLoop(_FlushBeforeWait(output))


class AmqpConnection(asyncio.Protocol):
    """Server side of one TCP connection."""

    def __init__(
        self,
        broker: Broker,
        management: Management,
        key: SharedAccessKey | None,
        on_lost: Callable[[AmqpConnection], None],
        output: OutputGroup | None = None,
    ) -> None:
        self.broker = broker
        self._output = output or OutputGroup(broker)
        self._on_lost = on_lost
        self.attacher = Attacher(broker, management, Authorization(key), Replies())
        self.sessions: dict[int, Session] = {}
        self.remote_max_frame_size = 512
        self._buffer = bytearray()  # a partial frame (or header), until the rest arrives
        self._needed = 0  # bytes the partial frame in _buffer needs before it can be parsed
        self._expect_header = True
        self._out: list[bytes] = []
        self._flush_pending = False
        self._wrote_since_idle_check = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        for session in self.sessions.values():
            session.close_links()
        self.sessions.clear()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._transport = None
        self._on_lost(self)

    def shut_down(self) -> None:
        """The broker is stopping: tell the client, then drop the connection."""
        self._close(error("amqp:connection:forced", "The emulator is shutting down."))

    # --- output ----------------------------------------------------------------------------------

    def send_frame(self, channel: int, body: Any, payload: bytes = b"", frame_type: int = 0) -> None:
        self._out.append(encode_frame(channel, body, payload, frame_type))
        self.schedule_flush()

    def send_encoded(self, frame: bytes) -> None:
        self._out.append(frame)
        self.schedule_flush()

    def schedule_flush(self) -> None:
        """Write everything queued once this loop iteration's work is done (see OutputGroup)."""
        if not self._flush_pending:
            self._flush_pending = True
            self._output.schedule(self)

    def flush(self) -> None:
        """Commit and write now (protocol headers, closing)."""
        self.prepare_output()
        try:
            self.broker.commit()
        except Exception:
            self.abandon_output()
            raise
        self.write_output()

    def abandon_output(self) -> None:
        """The commit this output waited for failed (e.g. a full disk): its acknowledgements must
        never be written, not even after a later commit succeeds. Drop them and close the
        connection; its clients see a lost connection and retry, as after a crash."""
        self._out.clear()
        self._flush_pending = False
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()  # what was written before (after successful commits) still goes out

    def prepare_output(self) -> None:
        for session in self.sessions.values():
            session.flush_dispositions()  # frames queued while a flush is pending schedule nothing
        self._flush_pending = False

    def write_output(self) -> None:
        if self._out and self._transport is not None:
            self._transport.write(b"".join(self._out))
            self._wrote_since_idle_check = True
        self._out.clear()

    def end_session(self, channel: int) -> None:
        self.sessions.pop(channel, None)

    # --- input -----------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """Split the stream into frames. They are read in place from ``data`` (only a partial frame
        is kept, in ``_buffer``); a receiver's accepted disposition, one per message in the steady
        state, goes straight to its session (``fastframes.accepted_disposition``)."""
        if self._buffer:
            self._buffer += data
            if len(self._buffer) < self._needed:
                return  # the frame is still incomplete: nothing to parse yet
            data = bytes(self._buffer)
            self._buffer.clear()
        elif not isinstance(data, bytes):
            data = bytes(data)  # frames may keep views of it: it must not change
        view = memoryview(data)
        end = len(view)
        offset = 0
        try:
            while self._transport is not None:
                if self._expect_header:
                    if end - offset < 8:
                        self._needed = 8
                        break
                    offset += 8
                    self._on_header(data[offset - 8 : offset])
                    continue
                if end - offset < 8:
                    self._needed = 8
                    break
                size, doff, frame_type, channel = FRAME_HEADER.unpack_from(view, offset)
                if size < 8 or size > MAX_FRAME_SIZE:
                    raise FrameError(f"frame size {size} outside 8..{MAX_FRAME_SIZE}")
                if doff < 2 or doff * 4 > size:
                    raise FrameError(f"data offset {doff} outside 2..{size // 4}")
                if end - offset < size:
                    self._needed = size
                    break
                body = view[offset + doff * 4 : offset + size]
                offset += size
                if not body:
                    continue
                if frame_type == FRAME_AMQP and len(body) > 2 and body[2] == 0x15:
                    accepted = accepted_disposition(body)
                    if accepted is not None:
                        session = self.sessions.get(channel)
                        if session is not None:
                            session.on_accepted(*accepted)
                        continue
                self._on_frame(frame_type, channel, body)
            if offset < end and self._transport is not None:
                self._buffer += view[offset:]
        except (FrameError, ValueError, KeyError, TypeError, RecursionError) as exc:
            _LOG.warning("closing connection after a protocol error: %s", exc)
            self._close(error("amqp:decode-error", f"Protocol error: {exc}"))
        except Exception:
            # A broker bug must cost this connection only, never the emulator.
            _LOG.exception("closing connection after an internal error")
            self._close(error("amqp:internal-error", "The emulator failed to process a frame."))

    def _on_header(self, header: bytes) -> None:
        if header == SASL_HEADER:
            self._write_now(SASL_HEADER)
            mechanisms = Array([Symbol("ANONYMOUS"), Symbol("MSSBCBS"), Symbol("PLAIN")], 0xA3)
            self.send_frame(
                0, composite("sasl_mechanisms", sasl_server_mechanisms=mechanisms), b"", FRAME_SASL
            )
            self._expect_header = False
        elif header == AMQP_HEADER:
            self._write_now(AMQP_HEADER)
            self._expect_header = False
        else:
            self._write_now(AMQP_HEADER)
            raise FrameError("unsupported protocol header")

    def _write_now(self, data: bytes) -> None:
        self._out.append(data)
        self.flush()

    def _on_frame(self, frame_type: int, channel: int, body: memoryview) -> None:
        name, fields, payload = parse_frame_body(body)
        if name not in (_SASL_FRAMES if frame_type == FRAME_SASL else _PERFORMATIVES):
            raise FrameError(f"{name} is not allowed in a frame of type {frame_type}")
        if frame_type == FRAME_SASL:
            if name == "sasl_init":
                self.send_frame(0, composite("sasl_outcome", code=0), b"", FRAME_SASL)
                self._expect_header = True
            return
        if name == "open":
            self._on_open(fields)
        elif name == "begin":
            session = Session(self, self.attacher, channel, fields)
            self.sessions[channel] = session
            self.send_frame(
                channel,
                composite(
                    "begin",
                    remote_channel=UShort(channel),
                    next_outgoing_id=UInt(0),
                    incoming_window=UInt(SESSION_WINDOW),
                    outgoing_window=UInt(SESSION_WINDOW),
                    handle_max=UInt(0xFFFF),
                ),
            )
        elif name == "close":
            self._close(None)
        elif channel in self.sessions:
            self.sessions[channel].on_frame(name, fields, payload)

    def _on_open(self, fields: dict[str, Any]) -> None:
        self.remote_max_frame_size = int(fields.get("max_frame_size") or 0xFFFFFFFF)
        self.send_frame(
            0,
            composite(
                "open",
                container_id="local-servicebus",
                max_frame_size=UInt(MAX_FRAME_SIZE),
                channel_max=UShort(0xFFFF),
            ),
        )
        idle_ms = fields.get("idle_time_out")
        if idle_ms:
            self._schedule_idle(int(idle_ms) / 2000)

    def _schedule_idle(self, interval: float) -> None:
        """Keep the client's idle timeout from firing: an empty frame when nothing else was sent."""

        def check() -> None:
            if self._transport is None:
                return
            if not self._wrote_since_idle_check:
                self._transport.write(EMPTY_FRAME)
            self._wrote_since_idle_check = False
            self._idle_timer = asyncio.get_running_loop().call_later(interval, check)

        self._idle_timer = asyncio.get_running_loop().call_later(interval, check)

    def _close(self, failure: Any) -> None:
        if self._transport is None:
            return
        self.send_frame(0, composite("close", error=failure))
        self.flush()
        for session in self.sessions.values():
            session.close_links()
        self.sessions.clear()
        self._transport.close()
