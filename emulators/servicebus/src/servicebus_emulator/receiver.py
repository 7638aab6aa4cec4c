"""The link a client receives an entity's messages on: a queue's ``Consumer``.

Settlement outcomes are echoed settled (the SDK waits for that echo). The lock token is the
delivery tag.
"""

from __future__ import annotations

import uuid
from typing import Any

from servicebus_emulator.broker import encode_delivery
from servicebus_emulator.codec import encode
from servicebus_emulator.fastframes import ACCEPTED_STATE
from servicebus_emulator.frames import composite, composite_name, error, fields_of
from servicebus_emulator.links import ACCEPTED, OutgoingLink
from servicebus_emulator.model import BrokerError, Entry, LockToken
from servicebus_emulator.ports import LinkSession
from servicebus_emulator.queue import MessageQueue

SESSION_FILTER = "com.microsoft:session-filter"
_TERMINAL_OUTCOMES = {"accepted", "released", "modified", "rejected"}


class ReceiverLink(OutgoingLink):
    """Delivers messages of one queue, subscription or dead-letter queue (see queue.Consumer)."""

    def __init__(self, session: LinkSession, fields: dict[str, Any], handle: int, address: str) -> None:
        super().__init__(session, fields, handle, address)
        self.session_id: str | None = None
        self.receive_and_delete = fields.get("snd_settle_mode") == 1
        self.queue: MessageQueue | None = None
        self.unsettled: dict[int, uuid.UUID] = {}

    def resume(self) -> None:
        if self.queue is not None:
            self.queue.pump()

    # --- Consumer --------------------------------------------------------------------------------

    def deliver(self, entry: Entry, lock_token: uuid.UUID | None) -> None:
        assert self.queue is not None  # only an attached receiver is a consumer
        payload = encode_delivery(entry, self.queue)
        if lock_token is None:
            self.transfer(payload, uuid.uuid4().bytes_le, settled=True)
        else:
            tag = lock_token.delivery_tag if isinstance(lock_token, LockToken) else lock_token.bytes_le
            delivery_id = self.transfer(payload, tag, settled=False)
            self.unsettled[delivery_id] = lock_token

    def entity_deleted(self) -> None:
        """Its entity was deleted through the management plane: detached as Azure does."""
        self.detach("amqp:not-found", f"The messaging entity '{self.address}' was deleted.")

    def session_lost(self) -> None:
        self.detach(
            "com.microsoft:session-lock-lost",
            f"The session lock has expired on the MessageSession '{self.session_id}'.",
        )

    # --- settlement ------------------------------------------------------------------------------

    def _unsettled_in(self, first: int, last: int) -> list[int]:
        """Unsettled delivery ids in first..last, in order. The SDK settles one delivery at a time,
        so a short range is looked up; a long one (peer-controlled, up to 2**32 ids) walks what is
        unsettled instead."""
        if first == last:
            return [first] if first in self.unsettled else []
        if last - first < len(self.unsettled):
            return [d for d in range(first, last + 1) if d in self.unsettled]
        return sorted(d for d in self.unsettled if first <= d <= last)

    def on_disposition(self, first: int, last: int, settled: bool, state: Any) -> None:
        """The client settled deliveries (those of first..last this link sent): apply the outcome,
        echo it (or the failure) settled."""
        settling = self._unsettled_in(first, last)
        outcome = composite_name(state)
        if not settling or outcome not in _TERMINAL_OUTCOMES or self.queue is None:
            return  # e.g. "received": progress only, the delivery stays unsettled
        for delivery_id in settling:
            token = self.unsettled.pop(delivery_id)
            echo: Any = state
            try:
                self._settle(self.queue, token, outcome, state)
                if outcome == "rejected":
                    echo = composite("rejected")
            except BrokerError as exc:
                echo = composite("rejected", error=error(exc.condition, exc.description))
            if not settled:
                self.session.send_disposition(
                    delivery_id, ACCEPTED_STATE if echo is state and outcome == "accepted" else encode(echo)
                )

    def on_accepted(self, first: int, last: int, settled: bool) -> None:
        """``on_disposition`` with the accepted outcome (a completion), one delivery without the
        generic outcome dispatch: the SDK completes one message per disposition."""
        if first != last:
            self.on_disposition(first, last, settled, ACCEPTED)
            return
        queue = self.queue
        if queue is None:
            return
        token = self.unsettled.pop(first, None)
        if token is None:
            return
        echo = ACCEPTED_STATE
        try:
            queue.complete(token)
        except BrokerError as exc:
            echo = encode(composite("rejected", error=error(exc.condition, exc.description)))
        if not settled:
            self.session.send_disposition(first, echo)

    @staticmethod
    def _settle(queue: MessageQueue, token: uuid.UUID, outcome: str | None, state: Any) -> None:
        if outcome == "accepted":
            queue.complete(token)
            return
        if outcome == "released":
            queue.release(token)
            return
        fields = fields_of(state)
        if outcome == "modified":
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
