"""Attach: decide what a new link is (entity, $cbs, $management; sessions) and answer it.

The link's class follows from its address and direction (``link_kind``); each is given what it
needs (broker, management, the connection's authorization and reply links).

A receiver asking for "next available session" may wait (bounded by the link's
``com.microsoft:timeout``) until a session has messages. A refused link is answered as Azure
does (Azure/azure-sdk-for-js#27308 shows it for a next-available wait that found no session): an
attach with neither source nor target, then a detach with the AMQP error the SDK maps to its
exception.
"""

from __future__ import annotations

import asyncio
from typing import Any

from servicebus_emulator.amqp_types import Described, Long, Symbol, UInt, ULong
from servicebus_emulator.broker import Broker, canonical
from servicebus_emulator.cbs import Authorization
from servicebus_emulator.frames import composite, fields_of
from servicebus_emulator.links import (
    CbsLink,
    CoordinatorLink,
    IncomingLink,
    Link,
    ManagementLink,
    OutgoingLink,
    Replies,
    ReplyLink,
    SenderLink,
)
from servicebus_emulator.management import Management
from servicebus_emulator.model import BrokerError
from servicebus_emulator.ports import LinkSession
from servicebus_emulator.queue import MessageQueue
from servicebus_emulator.receiver import SESSION_FILTER, ReceiverLink

DEFAULT_SESSION_WAIT_MS = 60_000
COORDINATOR = 0x30  # amqp:coordinator:list, the target of a link that declares transactions
_TICKS_AT_EPOCH = 621355968000000000  # .NET ticks (100 ns) at 1970-01-01, for locked-until-utc


class Attacher:
    """Makes the links of one connection and answers their attach (a session receiver may wait
    for a free session)."""

    def __init__(
        self, broker: Broker, management: Management, authorization: Authorization, replies: Replies
    ) -> None:
        self.broker = broker
        self.management = management
        self.authorization = authorization
        self.replies = replies

    def create(self, session: LinkSession, fields: dict[str, Any], handle: int) -> Link:
        """The link an attach asks for: its class from the node and who sends."""
        client_receives = bool(fields.get("role"))
        target = fields.get("target")
        if not client_receives and isinstance(target, Described) and target.descriptor == COORDINATOR:
            return CoordinatorLink(session, fields, handle, "$coordinator", max_message_size=0)
        terminus = fields_of(fields["source"] if client_receives else fields["target"])
        address = str(terminus.get("address") or "")
        node = canonical(address)
        is_request_node = node == "$cbs" or node.endswith("/$management")
        if client_receives:
            if is_request_node:
                return ReplyLink(session, fields, handle, address, replies=self.replies)
            return ReceiverLink(session, fields, handle, address)
        if not is_request_node:
            return SenderLink(session, fields, handle, address, broker=self.broker)
        size = self.broker.max_message_size
        if node == "$cbs":
            return CbsLink(
                session,
                fields,
                handle,
                address,
                replies=self.replies,
                max_message_size=size,
                authorization=self.authorization,
            )
        return ManagementLink(
            session,
            fields,
            handle,
            address,
            replies=self.replies,
            max_message_size=size,
            management=self.management,
        )

    def open(self, link: Link) -> None:
        """Answer a new link's attach, or refuse it."""
        try:
            if link.requires_token:
                self.authorization.require()
            link.check()
            if isinstance(link, ReceiverLink):
                self._attach_receiver(link)
                return
        except BrokerError as exc:
            self.refuse(link, exc)
            return
        if isinstance(link, ReplyLink):
            self.replies.register(link)
        self.reply(link)
        if isinstance(link, IncomingLink):
            link.grant_credit()

    def _attach_receiver(self, link: ReceiverLink) -> None:
        queue = self.broker.queue_for(link.address)
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
                waited = _timespan(wait_ms)
                self.refuse(
                    link,
                    BrokerError(
                        "com.microsoft:timeout",
                        f"The operation did not complete within the allotted timeout of {waited}.",
                    ),
                )

        timer = asyncio.get_running_loop().call_later(wait_ms / 1000, give_up)
        queue.session_waiters.append(try_accept)

    def _start_receiving(self, link: ReceiverLink, queue: MessageQueue, session_id: str | None) -> None:
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
        # Like Azure (and AMQP 1.0 section 2.6.3, "refusing a link"), a refused link's attach has
        # neither source nor target: the SDK then fails its open with the error of the detach that
        # follows, without running its attach callback (which logs a warning on a refused session).
        source = None if refused else fields["source"]
        target = None if refused else fields["target"]
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
                max_message_size=ULong(getattr(link, "max_message_size", self.broker.max_message_size)),
                properties=properties
                if client_receives
                else {Symbol("com.microsoft:max-message-batch-size"): ULong(self.broker.max_message_size)},
            )
        )

    def refuse(self, link: Link, exc: BrokerError) -> None:
        self.reply(link, refused=True)
        link.detach(exc.condition, exc.description)


def _timespan(milliseconds: int) -> str:
    """A duration the way .NET prints a TimeSpan in the service's errors (``00:00:59.9130000``)."""
    seconds, millis = divmod(milliseconds, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis * 10_000:07d}"
