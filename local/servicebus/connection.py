"""One client connection: protocol headers, SASL, open/close, sessions, attach/detach, frame routing.

Outgoing frames are buffered and written once per loop iteration, after the broker committed
what they acknowledge (group commit); TCP_NODELAY is set so nothing waits for Nagle.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from typing import Any

from local.servicebus.broker import Broker
from local.servicebus.cbs import SharedAccessKey
from local.servicebus.codec import Array, Long, Symbol, UInt, ULong, UShort
from local.servicebus.frames import (
    AMQP_HEADER,
    EMPTY_FRAME,
    FRAME_HEADER,
    FRAME_SASL,
    SASL_HEADER,
    FrameError,
    composite,
    encode_frame,
    error,
    fields_of,
    parse_frame_body,
)
from local.servicebus.links import SESSION_FILTER, IncomingLink, Link, OutgoingLink
from local.servicebus.management import Management
from local.servicebus.message import AmqpMessage
from local.servicebus.queue import BrokerError, MessageQueue

_LOG = logging.getLogger(__name__)
MAX_FRAME_SIZE = 64 * 1024
SESSION_WINDOW = 1 << 20
DEFAULT_SESSION_WAIT_MS = 60_000
_TICKS_AT_EPOCH = 621355968000000000  # .NET ticks (100 ns) at 1970-01-01, for locked-until-utc


class Session:
    """One AMQP session (channel): links by handle, delivery ids, dispositions to coalesce."""

    def __init__(
        self, connection: AmqpConnection, channel: int, remote_channel: int, next_incoming_id: int
    ) -> None:
        self.connection = connection
        self.channel = channel
        self.remote_channel = remote_channel
        self.next_incoming_id = next_incoming_id
        self.next_outgoing_id = 0
        self.by_remote_handle: dict[int, Link] = {}
        self.outgoing_by_handle: dict[int, OutgoingLink] = {}
        self._accepted: list[int] = []
        self._handles = itertools.count()

    def new_handle(self) -> int:
        """The broker's handle for a new link (never reused within the session)."""
        return next(self._handles)

    def send(self, body: Any, payload: bytes = b"") -> None:
        self.connection.send_frame(self.channel, body, payload)

    def _session_flow_fields(self) -> dict[str, Any]:
        return {
            "next_incoming_id": UInt(self.next_incoming_id),
            "incoming_window": UInt(SESSION_WINDOW),
            "next_outgoing_id": UInt(self.next_outgoing_id),
            "outgoing_window": UInt(SESSION_WINDOW),
        }

    def send_flow(self, link: Link, *, delivery_count: int, link_credit: int, drain: bool = False) -> None:
        self.send(
            composite(
                "flow",
                **self._session_flow_fields(),
                handle=UInt(link.handle),
                delivery_count=UInt(delivery_count & 0xFFFFFFFF),
                link_credit=UInt(link_credit),
                drain=drain or None,
            )
        )

    def transfer(self, link: Link, tag: bytes, payload: bytes, *, settled: bool) -> int:
        """Send one delivery, split into frames that fit the client's max frame size."""
        delivery_id = self.next_outgoing_id
        self.next_outgoing_id += 1
        room = self.connection.remote_max_frame_size - 128 - len(tag)
        offset = 0
        while True:
            chunk = payload[offset : offset + room]
            offset += len(chunk)
            more = offset < len(payload)
            self.send(
                composite(
                    "transfer",
                    handle=UInt(link.handle),
                    delivery_id=UInt(delivery_id),
                    delivery_tag=tag,
                    message_format=UInt(0),
                    settled=settled,
                    more=more or None,
                ),
                chunk,
            )
            if not more:
                return delivery_id

    def settle_incoming(self, delivery_id: int, outcome: Any) -> None:
        if composite_is_accepted(outcome):
            self._accepted.append(delivery_id)
            self.connection.schedule_flush()
        else:
            self.send(
                composite("disposition", role=True, first=UInt(delivery_id), settled=True, state=outcome)
            )

    def flush_dispositions(self) -> None:
        """One disposition per run of consecutive accepted deliveries."""
        ids, self._accepted = sorted(self._accepted), []
        start = 0
        for i in range(1, len(ids) + 1):
            if i == len(ids) or ids[i] != ids[i - 1] + 1:
                self.send(
                    composite(
                        "disposition",
                        role=True,
                        first=UInt(ids[start]),
                        last=UInt(ids[i - 1]) if i - 1 > start else None,
                        settled=True,
                        state=composite("accepted"),
                    )
                )
                start = i

    def forget(self, link: Link) -> None:
        self.by_remote_handle.pop(link.remote_handle, None)
        self.outgoing_by_handle.pop(link.handle, None)
        self.connection.forget_reply_link(link)

    def close_links(self) -> None:
        for link in list(self.by_remote_handle.values()):
            link.closed = True
            link.on_closed()
            self.connection.forget_reply_link(link)
        self.by_remote_handle.clear()
        self.outgoing_by_handle.clear()

    # --- frames from the client ------------------------------------------------------------------

    def on_frame(self, name: str, fields: dict[str, Any], payload: memoryview) -> None:
        if name == "transfer":
            if fields.get("delivery_id") is not None:
                self.next_incoming_id = int(fields["delivery_id"]) + 1
            link = self.by_remote_handle.get(fields["handle"])
            if isinstance(link, IncomingLink):
                link.on_transfer(fields, payload)
        elif name == "flow":
            link = self.by_remote_handle.get(fields["handle"]) if fields.get("handle") is not None else None
            if isinstance(link, OutgoingLink):
                link.on_flow(fields)
            elif fields.get("echo"):
                self.send(composite("flow", **self._session_flow_fields()))
        elif name == "disposition":
            self._on_disposition(fields)
        elif name == "attach":
            self.connection.attacher.attach(self, fields)
        elif name == "detach":
            link = self.by_remote_handle.get(fields["handle"])
            if link is not None and not link.closed:
                link.detach()
        elif name == "end":
            self.close_links()
            self.send(composite("end"))
            self.connection.sessions.pop(self.remote_channel, None)

    def _on_disposition(self, fields: dict[str, Any]) -> None:
        if not fields.get("role"):  # only a receiver settles what the broker sent
            return
        first = int(fields["first"])
        last = int(fields["last"]) if fields.get("last") is not None else first
        for link in list(self.outgoing_by_handle.values()):
            if any(first <= delivery_id <= last for delivery_id in link.unsettled):
                link.on_disposition(first, last, bool(fields.get("settled")), fields.get("state"))


def composite_is_accepted(outcome: Any) -> bool:
    return getattr(outcome, "descriptor", None) == 0x24


class Attacher:
    """Decides what a new link is and answers its attach (sessions may wait for a free session)."""

    def __init__(self, connection: AmqpConnection) -> None:
        self.connection = connection

    def attach(self, session: Session, fields: dict[str, Any]) -> None:
        client_receives = bool(fields.get("role"))
        terminus = fields_of(fields["source"] if client_receives else fields["target"])
        address = str(terminus.get("address") or "")
        handle = session.new_handle()
        link: Link = (OutgoingLink if client_receives else IncomingLink)(session, fields, handle, address)
        session.by_remote_handle[link.remote_handle] = link
        if isinstance(link, OutgoingLink):
            session.outgoing_by_handle[handle] = link
        try:
            self._check(link)
            if (
                isinstance(link, OutgoingLink)
                and link.node != "$cbs"
                and not link.node.endswith("/$management")
            ):
                self._attach_receiver(link)
                return
        except BrokerError as exc:
            self.refuse(link, exc)
            return
        if isinstance(link, OutgoingLink):
            self.connection.reply_links[link.node] = link
        self.reply(link)
        if isinstance(link, IncomingLink):
            link.grant_credit()

    def _check(self, link: Link) -> None:
        connection = self.connection
        if link.node == "$cbs" or link.node.endswith("/$management"):
            return
        if connection.key is not None and not connection.authorized:
            raise BrokerError(
                "amqp:unauthorized-access", "Unauthorized access: put a valid token on $cbs first."
            )
        if isinstance(link, IncomingLink):
            connection.broker.check_send_target(link.address)

    def _attach_receiver(self, link: OutgoingLink) -> None:
        queue = self.connection.broker.queue_for(link.address)
        source = fields_of(link.attach_fields["source"])
        session_filter = {str(k): v for k, v in (source.get("filter") or {}).items()}
        wants_session = SESSION_FILTER in session_filter
        if queue.settings.requires_session != wants_session:
            raise BrokerError(
                "amqp:not-allowed",
                (
                    "It is not possible for an entity that requires sessions to create a non-sessionful "
                    "message receiver."
                )
                if queue.settings.requires_session
                else (
                    "It is not possible for an entity that does not require sessions to create a sessionful "
                    "message receiver."
                ),
            )
        link.queue = queue
        if not wants_session:
            self._start_receiving(link, queue, None)
            return
        requested = session_filter[SESSION_FILTER]
        chosen = queue.lock_session(None if requested is None else str(requested), link)
        if chosen is not None:
            self._start_receiving(link, queue, chosen)
            return
        wait_ms = int(
            (link.attach_fields.get("properties") or {}).get("com.microsoft:timeout")
            or DEFAULT_SESSION_WAIT_MS
        )

        def try_accept() -> bool:
            if link.closed:
                return True
            found = queue.lock_session(None, link)
            if found is not None:
                timer.cancel()
                self._start_receiving(link, queue, found)
            return found is not None

        def give_up() -> None:
            if try_accept in queue.session_waiters:
                queue.session_waiters.remove(try_accept)
                link.queue = None
                self.refuse(
                    link,
                    BrokerError(
                        "com.microsoft:timeout", "No session available to accept within the timeout."
                    ),
                )

        timer = asyncio.get_running_loop().call_later(wait_ms / 1000, give_up)
        queue.session_waiters.append(try_accept)

    def _start_receiving(self, link: OutgoingLink, queue: MessageQueue, session_id: str | None) -> None:
        properties = None
        if session_id is not None:
            link.session_id = session_id
            until = queue.session_locks[session_id].until_ms
            properties = {Symbol("com.microsoft:locked-until-utc"): Long(until * 10_000 + _TICKS_AT_EPOCH)}
        self.reply(link, session_id=session_id, properties=properties)
        queue.attach(link)
        queue.pump()

    def reply(
        self,
        link: Link,
        *,
        session_id: str | None = None,
        properties: dict[Any, Any] | None = None,
        refused: bool = False,
    ) -> None:
        fields = link.attach_fields
        client_receives = isinstance(link, OutgoingLink)
        # A refused sender link gets a null target (the SDK then reports the detach error when it
        # sends); a refused receiver keeps its source, so the SDK reports the error while opening.
        source = fields["source"]
        target = None if refused and not client_receives else fields["target"]
        if session_id is not None:
            terms = fields_of(source)
            terms["filter"] = {**(terms.get("filter") or {}), Symbol(SESSION_FILTER): session_id}
            source = composite("source", **terms)
        link.session.send(
            composite(
                "attach",
                name=link.name,
                handle=UInt(link.handle),
                role=not client_receives,
                snd_settle_mode=fields.get("snd_settle_mode"),
                rcv_settle_mode=fields.get("rcv_settle_mode"),
                source=source,
                target=target,
                initial_delivery_count=UInt(0) if client_receives else None,
                max_message_size=ULong(self.connection.broker.max_message_size),
                properties=properties
                if client_receives
                else {
                    Symbol("com.microsoft:max-message-batch-size"): ULong(
                        self.connection.broker.max_message_size
                    )
                },
            )
        )

    def refuse(self, link: Link, exc: BrokerError) -> None:
        self.reply(link, refused=True)
        link.detach(exc.condition, exc.description)


class AmqpConnection(asyncio.Protocol):
    """Server side of one TCP connection."""

    def __init__(self, broker: Broker, management: Management, key: SharedAccessKey | None) -> None:
        self.broker = broker
        self.management = management
        self.key = key
        self.authorized = False
        self.attacher = Attacher(self)
        self.sessions: dict[int, Session] = {}
        self.reply_links: dict[str, OutgoingLink] = {}
        self.remote_max_frame_size = 512
        self._buffer = bytearray()
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

    # --- output ----------------------------------------------------------------------------------

    def send_frame(self, channel: int, body: Any, payload: bytes = b"", frame_type: int = 0) -> None:
        self._out.append(encode_frame(channel, body, payload, frame_type))
        self.schedule_flush()

    def schedule_flush(self) -> None:
        """Write everything queued once this loop iteration's work is done."""
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_pending = False
        for session in self.sessions.values():
            session.flush_dispositions()
        self.broker.commit()
        if self._out and self._transport is not None:
            self._transport.write(b"".join(self._out))
            self._wrote_since_idle_check = True
        self._out.clear()

    def reply(self, node: str, response: AmqpMessage) -> None:
        link = self.reply_links.get(node)
        if link is not None:
            link.send_reply(response)

    def forget_reply_link(self, link: Link) -> None:
        if self.reply_links.get(link.node) is link:
            del self.reply_links[link.node]

    # --- input -----------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        try:
            while self._transport is not None:
                if self._expect_header:
                    if len(self._buffer) < 8:
                        return
                    self._on_header(bytes(self._buffer[:8]))
                    del self._buffer[:8]
                    continue
                if len(self._buffer) < 8:
                    return
                size, doff, frame_type, channel = FRAME_HEADER.unpack_from(self._buffer, 0)
                if size < 8 or size > MAX_FRAME_SIZE:
                    raise FrameError(f"frame size {size} outside 8..{MAX_FRAME_SIZE}")
                if len(self._buffer) < size:
                    return
                body = memoryview(bytes(self._buffer[doff * 4 : size]))
                del self._buffer[:size]
                if body:
                    self._on_frame(frame_type, channel, body)
        except (FrameError, ValueError, KeyError, TypeError) as exc:
            _LOG.warning("closing connection after a protocol error: %s", exc)
            self._close(error("amqp:decode-error", f"Protocol error: {exc}"))

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
        if frame_type == FRAME_SASL:
            if name == "sasl_init":
                self.send_frame(0, composite("sasl_outcome", code=0), b"", FRAME_SASL)
                self._expect_header = True
            return
        if name == "open":
            self._on_open(fields)
        elif name == "begin":
            session = Session(self, channel, channel, int(fields.get("next_outgoing_id") or 0))
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
