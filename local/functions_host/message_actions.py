"""Settlement actions for Service Bus-triggered functions, bound to the receiver that got the message.

Same method names and signatures as ``azurefunctions.extensions.bindings.servicebus
.ServiceBusMessageActions`` (which, on Azure, forwards them over gRPC to the host that owns the
receiver); here the host owns the receiver in-process, so the calls go straight to it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from azure.servicebus import ServiceBusReceivedMessage, ServiceBusReceiver, ServiceBusSession


class MessageActionsError(RuntimeError):
    """A settlement call was refused (wrong message, or it was already settled)."""


class LocalMessageActions:
    """Settles the one message an invocation received; records whether the function settled it."""

    def __init__(self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage) -> None:
        self._receiver = receiver
        self._message = message
        self._settled_with: str | None = None
        self._lock = threading.Lock()

    @property
    def settled_with(self) -> str | None:
        """ "complete", "abandon", "deadletter" or "defer" once settled; None before."""
        return self._settled_with

    def complete(self, message: ServiceBusReceivedMessage) -> None:
        with self._settling(message, "complete"):
            self._receiver.complete_message(message)

    def abandon(self, message: ServiceBusReceivedMessage) -> None:
        with self._settling(message, "abandon"):
            self._receiver.abandon_message(message)

    def deadletter(
        self,
        message: ServiceBusReceivedMessage,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        with self._settling(message, "deadletter"):
            self._receiver.dead_letter_message(
                message, reason=deadletter_reason, error_description=deadletter_error_description
            )

    def defer(self, message: ServiceBusReceivedMessage) -> None:
        with self._settling(message, "defer"):
            self._receiver.defer_message(message)

    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> None:
        self._check(message)
        self._receiver.renew_message_lock(message)

    def set_session_state(self, session_id: str, session_state: bytes) -> None:
        self._session(session_id).set_state(session_state)

    def renew_session_lock(self, session_id: str) -> datetime:
        return self._session(session_id).renew_lock()

    def _session(self, session_id: str) -> ServiceBusSession:
        session = self._receiver.session
        if session.session_id != session_id:
            raise MessageActionsError(
                f"this invocation holds session {session.session_id!r}, not {session_id!r}"
            )
        return session

    def _check(self, message: ServiceBusReceivedMessage) -> None:
        if message.lock_token != self._message.lock_token:
            raise MessageActionsError("message actions can only settle the message of this invocation")

    @contextmanager
    def _settling(self, message: ServiceBusReceivedMessage, outcome: str) -> Iterator[None]:
        """One settlement per message, recorded only once the broker accepted it."""
        self._check(message)
        with self._lock:
            if self._settled_with is not None:
                raise MessageActionsError(f"message already settled with {self._settled_with}")
            yield
            self._settled_with = outcome
