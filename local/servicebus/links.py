"""AMQP links: what a client sends to the broker (IncomingLink) and what it receives (OutgoingLink).

A link's address decides its kind: an entity, ``$cbs`` (put-token) or ``<entity>/$management``.
Credit is re-issued as soon as half of it is used, settlement outcomes are echoed settled (the
SDK waits for that echo), so no exchange ever waits on a timer.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from local.servicebus.amqp_types import UInt
from local.servicebus.broker import canonical, encode_delivery
from local.servicebus.cbs import check_put_token
from local.servicebus.frames import composite, composite_name, error, fields_of
from local.servicebus.management import body_value, value_message
from local.servicebus.message import BATCH_MESSAGE_FORMAT, AmqpMessage, MessageFormatError, split_batch
from local.servicebus.model import BrokerError, Entry
from local.servicebus.queue import MessageQueue

if TYPE_CHECKING:
    from local.servicebus.session import Session

SESSION_FILTER = "com.microsoft:session-filter"
CREDIT_WINDOW = 1000
_ACCEPTED = composite("accepted")
_TERMINAL_OUTCOMES = {"accepted", "released", "modified", "rejected"}


class Link:
    """What both directions share: identity, addresses, detaching."""

    def __init__(self, session: Session, fields: dict[str, Any], handle: int, address: str) -> None:
        self.session = session
        self.name = fields["name"]
        self.remote_handle = fields["handle"]
        self.handle = handle
        self.address = address
        self.node = canonical(address)
        self.attach_fields = fields
        self.closed = False

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
    """The client sends: messages to an entity, put-token to $cbs, requests to $management."""

    def __init__(self, session: Session, fields: dict[str, Any], handle: int, address: str) -> None:
        super().__init__(session, fields, handle, address)
        self.delivery_count = int(fields.get("initial_delivery_count") or 0)
        self.credit = 0
        self._partial = bytearray()
        self._partial_size = 0  # counted even once an oversized delivery stops being buffered
        self._first: dict[str, Any] | None = None

    def grant_credit(self) -> None:
        self.credit = CREDIT_WINDOW
        self.session.send_flow(self, delivery_count=self.delivery_count, link_credit=self.credit)

    def on_transfer(self, fields: dict[str, Any], payload: memoryview) -> None:
        if self._first is None:
            self._first = fields
        if fields.get("aborted"):
            self._partial.clear()
            self._partial_size = 0
            self._first = None
            return
        self._partial_size += len(payload)
        limit = self.session.connection.broker.max_message_size
        if fields.get("more"):
            if self._partial_size <= limit:  # past the limit, memory stays bounded
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
        outcome = self._receive(data, size, int(first.get("message_format") or 0))
        if not first.get("settled"):
            self.session.settle_incoming(int(first["delivery_id"]), outcome)

    def _receive(self, data: bytes, size: int, message_format: int) -> Any:
        """Handle one complete delivery; return the outcome to report."""
        connection = self.session.connection
        try:
            if self.node == "$cbs":
                request = AmqpMessage.parse(data)
                status, description = check_put_token(request, body_value(request), connection.key)
                connection.authorized = connection.authorized or status < 300
                self._reply("$cbs", request, {"status-code": status, "status-description": description})
                return _ACCEPTED
            if self.node.endswith("/$management"):
                request = AmqpMessage.parse(data)
                response = connection.management.handle(self.node, request)
                connection.reply(self.node, response)
                return _ACCEPTED
            broker = connection.broker
            if size > broker.max_message_size:
                raise BrokerError(
                    "amqp:link:message-size-exceeded",
                    f"The received message (size {size} bytes) exceeds the limit "
                    f"({broker.max_message_size} bytes) currently allowed on the link.",
                )
            message = AmqpMessage.parse(data)
            messages = split_batch(message) if message_format == BATCH_MESSAGE_FORMAT else [message]
            broker.send(self.address, messages)
            return _ACCEPTED
        except MessageFormatError as exc:
            return composite("rejected", error=error("amqp:decode-error", str(exc)))
        except BrokerError as exc:
            return composite("rejected", error=error(exc.condition, exc.description))

    def _reply(self, node: str, request: AmqpMessage, properties: dict[str, Any]) -> None:
        properties = {
            key: (UInt(value) if isinstance(value, int) else value) for key, value in properties.items()
        }
        response = value_message(None, properties, request.properties.get("message_id"))
        self.session.connection.reply(node, response)


class OutgoingLink(Link):
    """The client receives: messages from an entity (a Consumer), or $cbs/$management responses."""

    def __init__(self, session: Session, fields: dict[str, Any], handle: int, address: str) -> None:
        super().__init__(session, fields, handle, address)
        self.delivery_count = 0
        self.link_credit = 0
        self.session_id: str | None = None
        self.receive_and_delete = fields.get("snd_settle_mode") == 1
        self.queue: MessageQueue | None = None
        self.unsettled: dict[int, uuid.UUID] = {}
        self._replies: list[AmqpMessage] = []

    def on_flow(self, fields: dict[str, Any]) -> None:
        remote_count = fields.get("delivery_count")
        remote_count = self.delivery_count if remote_count is None else int(remote_count)
        self.link_credit = remote_count + int(fields.get("link_credit") or 0) - self.delivery_count
        self.resume()
        if fields.get("drain") and self.link_credit > 0:
            self.delivery_count += self.link_credit
            self.link_credit = 0
            self.session.send_flow(self, delivery_count=self.delivery_count, link_credit=0, drain=True)
        elif fields.get("echo"):
            self.session.send_flow(self, delivery_count=self.delivery_count, link_credit=self.link_credit)

    @property
    def credit(self) -> int:
        """Deliveries the client accepts now: link credit, bounded by the session's incoming window."""
        return min(self.link_credit, self.session.remote_incoming_window)

    def resume(self) -> None:
        """Credit or session window opened: send what waits."""
        while self._replies and self.credit > 0:
            self._transfer(self._replies.pop(0).encode(), uuid.uuid4().bytes, settled=True)
        if self.queue is not None:
            self.queue.pump()

    def _transfer(self, payload: bytes, tag: bytes, *, settled: bool) -> int:
        self.link_credit -= 1
        self.delivery_count += 1
        return self.session.transfer(self, tag, payload, settled=settled)

    def send_reply(self, message: AmqpMessage) -> None:
        if self.credit > 0:
            self._transfer(message.encode(), uuid.uuid4().bytes, settled=True)
        else:
            self._replies.append(message)

    # --- Consumer (see queue.Consumer) -------------------------------------------------------------

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None:
        assert self.queue is not None  # only a receiving link is a consumer
        payload = encode_delivery(entry, self.queue)
        if lock_token is None:
            self._transfer(payload, uuid.uuid4().bytes_le, settled=True)
        else:
            delivery_id = self._transfer(payload, lock_token.bytes_le, settled=False)
            self.unsettled[delivery_id] = lock_token

    def session_lost(self) -> None:
        self.detach(
            "com.microsoft:session-lock-lost",
            f"The session lock has expired on the MessageSession '{self.session_id}'.",
        )

    def _unsettled_in(self, first: int, last: int) -> list[int]:
        """Unsettled delivery ids in first..last, in order. The SDK settles one delivery at a time,
        so a short range is looked up; a long one (peer-controlled, up to 2**32 ids) walks what is
        unsettled instead."""
        if last - first < len(self.unsettled):
            return [d for d in range(first, last + 1) if d in self.unsettled]
        return sorted(d for d in self.unsettled if first <= d <= last)

    def settles_any(self, first: int, last: int) -> bool:
        if first == last:
            return first in self.unsettled
        return bool(self._unsettled_in(first, last))

    def on_disposition(self, first: int, last: int, settled: bool, state: Any) -> None:
        """The client settled deliveries: apply the outcome, echo it (or the failure) settled."""
        outcome = composite_name(state)
        if outcome not in _TERMINAL_OUTCOMES or self.queue is None:
            return  # e.g. "received": progress only, the delivery stays unsettled
        for delivery_id in self._unsettled_in(first, last):
            token = self.unsettled.pop(delivery_id)
            echo = state
            try:
                self._settle(self.queue, token, outcome, fields_of(state))
                if outcome == "rejected":
                    echo = composite("rejected")
            except BrokerError as exc:
                echo = composite("rejected", error=error(exc.condition, exc.description))
            if not settled:
                self.session.send(
                    composite("disposition", role=False, first=UInt(delivery_id), settled=True, state=echo)
                )

    @staticmethod
    def _settle(queue: MessageQueue, token: uuid.UUID, outcome: str | None, fields: dict[str, Any]) -> None:
        if outcome == "accepted":
            queue.complete(token)
        elif outcome == "released":
            queue.release(token)
        elif outcome == "modified":
            if fields.get("undeliverable_here"):
                queue.defer(token)
            else:
                queue.abandon(token)
        elif outcome == "rejected":
            failure = fields_of(fields["error"]) if fields.get("error") is not None else {}
            info = failure.get("info") or {}
            reason = info.get("DeadLetterReason")  # a Symbol key equals the str key
            description = info.get("DeadLetterErrorDescription") or failure.get("description")
            queue.dead_letter(token, str(reason or ""), str(description or ""))

    def on_closed(self) -> None:
        if self.queue is not None:
            self.queue.detach(self)
            self.queue = None
