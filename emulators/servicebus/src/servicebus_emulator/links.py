"""AMQP links: what a client sends to the broker (``IncomingLink``) and what it receives
(``OutgoingLink``), one subclass per kind of node: an entity (``SenderLink``, and
``receiver.ReceiverLink``), ``$cbs`` (``CbsLink``) or ``<entity>/$management``
(``ManagementLink``), their responses going out on a ``ReplyLink``.

Each link is given what it needs (its session through ``ports.LinkSession``, the broker, the
connection's authorization or reply links), never its connection. Credit is re-issued as soon as
half of it is used, so no exchange ever waits on a timer.
"""

from __future__ import annotations

import uuid
from typing import Any

from servicebus_emulator.amqp_types import UInt
from servicebus_emulator.broker import Broker, canonical
from servicebus_emulator.cbs import Authorization
from servicebus_emulator.frames import composite, error
from servicebus_emulator.management import Management, body_value, value_message
from servicebus_emulator.message import BATCH_MESSAGE_FORMAT, AmqpMessage, MessageFormatError, split_batch
from servicebus_emulator.model import BrokerError
from servicebus_emulator.ports import LinkSession

CREDIT_WINDOW = 1000
ACCEPTED = composite("accepted")


class Link:
    """What both directions share: identity, addresses, detaching."""

    requires_token = True  # entity links need a $cbs token first; $cbs and $management do not

    def __init__(self, session: LinkSession, fields: dict[str, Any], handle: int, address: str) -> None:
        self.session = session
        self.name = fields["name"]
        self.remote_handle: int = fields["handle"]
        self.handle = handle
        self.address = address
        self.node = canonical(address)
        self.attach_fields = fields
        self.closed = False

    def check(self) -> None:
        """Raise BrokerError when the link must be refused (beyond the $cbs token)."""

    def detach(self, condition: str | None = None, description: str | None = None) -> None:
        """Close the link from the broker's side (with an error when ``condition`` is given)."""
        if self.closed:
            return
        self.closed = True
        self.session.send(
            composite(
                "detach",
                handle=UInt(self.handle),
                closed=True,
                error=error(condition, description) if condition else None,
            )
        )
        self.session.forget(self)
        self.on_closed()

    def on_closed(self) -> None:
        """Release what the link holds; called once, however it closed."""


class IncomingLink(Link):
    """The client sends: assembles (multi-frame) deliveries, keeps credit open, settles each."""

    def __init__(
        self,
        session: LinkSession,
        fields: dict[str, Any],
        handle: int,
        address: str,
        *,
        max_message_size: int,
    ) -> None:
        super().__init__(session, fields, handle, address)
        self.max_message_size = max_message_size
        self.delivery_count = int(fields.get("initial_delivery_count") or 0)
        self.credit = 0
        self._partial = bytearray()
        self._partial_size = 0  # counted even once an oversized delivery stops being buffered
        self._first: dict[str, Any] | None = None

    def grant_credit(self) -> None:
        self.credit = CREDIT_WINDOW
        self.session.send_flow(self.handle, delivery_count=self.delivery_count, link_credit=self.credit)

    def on_transfer(self, fields: dict[str, Any], payload: memoryview) -> None:
        if self._first is None:
            self._first = fields
        if fields.get("aborted"):
            self._partial.clear()
            self._partial_size = 0
            self._first = None
            return
        self._partial_size += len(payload)
        if fields.get("more"):
            if self._partial_size <= self.max_message_size:  # past the limit, memory stays bounded
                self._partial += payload
            return
        first, self._first = self._first, None
        size, self._partial_size = self._partial_size, 0
        data = bytes(self._partial) + bytes(payload) if self._partial else bytes(payload)
        self._partial.clear()
        self.delivery_count += 1
        self.credit -= 1
        if self.credit < CREDIT_WINDOW // 2:
            self.grant_credit()
        try:
            outcome = self.receive(data, size, int(first.get("message_format") or 0))
        except MessageFormatError as exc:
            outcome = composite("rejected", error=error("amqp:decode-error", str(exc)))
        except BrokerError as exc:
            outcome = composite("rejected", error=error(exc.condition, exc.description))
        if not first.get("settled"):
            self.session.settle_incoming(int(first["delivery_id"]), outcome)

    def receive(self, data: bytes, size: int, message_format: int) -> Any:
        """Handle one complete delivery; return the outcome to report (or raise BrokerError)."""
        raise NotImplementedError


class SenderLink(IncomingLink):
    """The client sends messages to a queue or topic."""

    def __init__(
        self, session: LinkSession, fields: dict[str, Any], handle: int, address: str, *, broker: Broker
    ) -> None:
        super().__init__(
            session, fields, handle, address, max_message_size=broker.max_message_size_of(address)
        )
        self.broker = broker

    def check(self) -> None:
        self.broker.check_send_target(self.address)

    def receive(self, data: bytes, size: int, message_format: int) -> Any:
        if size > self.max_message_size:
            raise BrokerError(
                "amqp:link:message-size-exceeded",
                f"The received message (size {size} bytes) exceeds the limit "
                f"({self.max_message_size} bytes) currently allowed on the link.",
            )
        message = AmqpMessage.parse(data)
        messages = split_batch(message) if message_format == BATCH_MESSAGE_FORMAT else [message]
        self.broker.send(self.address, messages)
        return ACCEPTED


class CoordinatorLink(IncomingLink):
    """A transaction coordinator (AMQP 1.0 transactions: declare, discharge). Refused when opened:
    the emulator has no transactions (neither SDK it is tested with, Python 7.15 and JavaScript
    7.9, can start one), so a client that tries gets a clear error, not a half transaction."""

    def check(self) -> None:
        raise BrokerError("amqp:not-implemented", "Transactions are not supported by the emulator.")


class OutgoingLink(Link):
    """The client receives: link credit (bounded by the session's window), transfers."""

    def __init__(self, session: LinkSession, fields: dict[str, Any], handle: int, address: str) -> None:
        super().__init__(session, fields, handle, address)
        self.delivery_count = 0
        self.link_credit = 0

    def on_flow(self, fields: dict[str, Any]) -> None:
        remote_count = fields.get("delivery_count")
        remote_count = self.delivery_count if remote_count is None else int(remote_count)
        self.link_credit = remote_count + int(fields.get("link_credit") or 0) - self.delivery_count
        self.resume()
        if fields.get("drain") and self.link_credit > 0:
            self.delivery_count += self.link_credit
            self.link_credit = 0
            self.session.send_flow(self.handle, delivery_count=self.delivery_count, link_credit=0, drain=True)
        elif fields.get("echo"):
            self.session.send_flow(
                self.handle, delivery_count=self.delivery_count, link_credit=self.link_credit
            )

    @property
    def credit(self) -> int:
        """Deliveries the client accepts now: link credit, bounded by the session's incoming window."""
        return min(self.link_credit, self.session.remote_incoming_window)

    def resume(self) -> None:
        """Credit or session window opened: send what waits."""

    def transfer(self, payload: bytes, tag: bytes, *, settled: bool) -> int:
        self.link_credit -= 1
        self.delivery_count += 1
        return self.session.transfer(self.handle, tag, payload, settled=settled)


class ReplyLink(OutgoingLink):
    """Carries the responses of ``$cbs`` or ``<entity>/$management`` to the client."""

    requires_token = False

    def __init__(
        self, session: LinkSession, fields: dict[str, Any], handle: int, address: str, *, replies: Replies
    ) -> None:
        super().__init__(session, fields, handle, address)
        self.replies = replies
        self._waiting: list[AmqpMessage] = []

    def resume(self) -> None:
        while self._waiting and self.credit > 0:
            self.transfer(self._waiting.pop(0).encode(), uuid.uuid4().bytes, settled=True)

    def send_reply(self, message: AmqpMessage) -> None:
        if self.credit > 0:
            self.transfer(message.encode(), uuid.uuid4().bytes, settled=True)
        else:
            self._waiting.append(message)

    def on_closed(self) -> None:
        self.replies.forget(self)


class Replies:
    """One connection's reply links by node: where $cbs and $management responses go."""

    def __init__(self) -> None:
        self._links: dict[str, ReplyLink] = {}

    def register(self, link: ReplyLink) -> None:
        self._links[link.node] = link

    def forget(self, link: ReplyLink) -> None:
        if self._links.get(link.node) is link:
            del self._links[link.node]

    def reply(self, node: str, response: AmqpMessage) -> None:
        link = self._links.get(node)
        if link is not None:
            link.send_reply(response)


class RequestLink(IncomingLink):
    """The client sends requests to a node that answers on the connection's reply link for it."""

    requires_token = False

    def __init__(
        self,
        session: LinkSession,
        fields: dict[str, Any],
        handle: int,
        address: str,
        *,
        replies: Replies,
        max_message_size: int,
    ) -> None:
        super().__init__(session, fields, handle, address, max_message_size=max_message_size)
        self.replies = replies

    def receive(self, data: bytes, size: int, message_format: int) -> Any:
        request = AmqpMessage.parse(data)
        self.replies.reply(self.node, self.answer(request))
        return ACCEPTED

    def answer(self, request: AmqpMessage) -> AmqpMessage:
        raise NotImplementedError


class CbsLink(RequestLink):
    """``$cbs``: put-token requests, which authorize the connection."""

    def __init__(self, *args: Any, authorization: Authorization, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.authorization = authorization

    def answer(self, request: AmqpMessage) -> AmqpMessage:
        status, description = self.authorization.put_token(request, body_value(request))
        properties = {"status-code": UInt(status), "status-description": description}
        return value_message(None, properties, request.properties.get("message_id"))


class ManagementLink(RequestLink):
    """``<entity>/$management``: lock renewal, peek, scheduling, session state and the rest."""

    def __init__(self, *args: Any, management: Management, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.management = management

    def answer(self, request: AmqpMessage) -> AmqpMessage:
        return self.management.handle(self.node, request)
