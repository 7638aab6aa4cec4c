"""Attach: decide what a new link is (entity, $cbs, $management; sessions) and answer it.

A receiver asking for "next available session" may wait (bounded by the link's
``com.microsoft:timeout``) until a session has messages. A refused link is answered as Azure
does (Azure/azure-sdk-for-js#27308 shows it for a next-available wait that found no session): an
attach with neither source nor target, then a detach with the AMQP error the SDK maps to its
exception.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from local.servicebus.amqp_types import Long, Symbol, UInt, ULong
from local.servicebus.frames import composite, fields_of
from local.servicebus.links import SESSION_FILTER, IncomingLink, Link, OutgoingLink
from local.servicebus.model import BrokerError
from local.servicebus.queue import MessageQueue
from local.servicebus.session import Session

if TYPE_CHECKING:
    from local.servicebus.connection import AmqpConnection

DEFAULT_SESSION_WAIT_MS = 60_000
_TICKS_AT_EPOCH = 621355968000000000  # .NET ticks (100 ns) at 1970-01-01, for locked-until-utc


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


def _timespan(milliseconds: int) -> str:
    """A duration the way .NET prints a TimeSpan in the service's errors (``00:00:59.9130000``)."""
    seconds, millis = divmod(milliseconds, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis * 10_000:07d}"
