"""The ``<entity>/$management`` request/response operations (names prefixed ``com.microsoft:``).

Each request is an AMQP message whose body value is a map; the answer carries ``statusCode``,
``statusDescription`` (and ``errorCondition`` on failure) as application properties and a map body,
in the shapes the azure-servicebus SDK parses (see its ``_common/mgmt_handlers.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from servicebus_emulator.amqp_types import Array, Described, Int, Long, Symbol, Timestamp, ULong
from servicebus_emulator.broker import Broker, canonical, encode_delivery
from servicebus_emulator.codec import encode
from servicebus_emulator.message import AMQP_VALUE, AmqpMessage
from servicebus_emulator.model import BrokerError
from servicebus_emulator.queue import MessageQueue

Response = tuple[int, dict[str, Any] | None]
_DATETIME_MAX_MS = 253402300800000
_STATUS_BY_CONDITION = {
    "amqp:not-found": 404,
    "com.microsoft:message-not-found": 404,
    "com.microsoft:message-lock-lost": 410,
    "com.microsoft:session-lock-lost": 410,
    "com.microsoft:session-cannot-be-locked": 409,
    "amqp:not-allowed": 400,
    "com.microsoft:argument-error": 400,
    "amqp:resource-limit-exceeded": 403,
}


def body_value(message: AmqpMessage) -> Any:
    """The amqp-value body of a request (None when the body is something else)."""
    for section in message.body_sections():
        return section.value if section.descriptor == AMQP_VALUE else None
    return None


def value_message(value: Any, application_properties: dict[Any, Any], correlation_id: Any) -> AmqpMessage:
    """A response message: an amqp-value body, correlated with the request's message id."""
    return AmqpMessage(
        properties={"correlation_id": correlation_id},
        application_properties=application_properties,
        body=encode(Described(ULong(AMQP_VALUE), value)),
    )


def _tokens(body: dict[str, Any]) -> list[uuid.UUID]:
    return [
        token if isinstance(token, uuid.UUID) else uuid.UUID(str(token))
        for token in body.get("lock-tokens", [])
    ]


def _session(body: dict[str, Any]) -> str:
    session_id = body.get("session-id")
    if not isinstance(session_id, str):
        raise BrokerError("com.microsoft:argument-error", "The request needs a session-id.")
    return session_id


class Management:
    """Dispatches management requests for one broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._operations: dict[str, Callable[[str, MessageQueue | None, dict[str, Any]], Response]] = {
            "com.microsoft:renew-lock": self._renew_lock,
            "com.microsoft:update-disposition": self._update_disposition,
            "com.microsoft:peek-message": self._peek,
            "com.microsoft:receive-by-sequence-number": self._receive_by_sequence_number,
            "com.microsoft:schedule-message": self._schedule,
            "com.microsoft:cancel-scheduled-message": self._cancel_scheduled,
            "com.microsoft:get-session-state": self._get_session_state,
            "com.microsoft:set-session-state": self._set_session_state,
            "com.microsoft:renew-session-lock": self._renew_session_lock,
            "com.microsoft:get-message-sessions": self._get_message_sessions,
        }

    def handle(self, node: str, request: AmqpMessage) -> AmqpMessage:
        """Answer one request sent to ``node`` (``<entity>/$management``)."""
        entity = canonical(node).removesuffix("/$management")
        operation = request.application_properties.get("operation")
        properties: dict[Any, Any]
        try:
            handler = self._operations.get(str(operation))
            if handler is None:
                raise BrokerError("amqp:not-implemented", f"Operation {operation!r} is not supported.")
            body = body_value(request)
            queue = self.broker.queues.get(entity)
            if queue is None and entity not in self.broker.topics:
                raise BrokerError("amqp:not-found", f"The messaging entity '{entity}' could not be found.")
            status, value = handler(entity, queue, body if isinstance(body, dict) else {})
            properties = {
                "statusCode": Int(status),
                "statusDescription": "OK" if status < 300 else "No content",
            }
        except BrokerError as exc:
            status, value = _STATUS_BY_CONDITION.get(exc.condition, 500), None
            properties = {
                "statusCode": Int(status),
                "statusDescription": exc.description,
                "errorCondition": Symbol(exc.condition),
            }
        return value_message(
            value if value is not None else {}, properties, request.properties.get("message_id")
        )

    @staticmethod
    def _need_queue(entity: str, queue: MessageQueue | None) -> MessageQueue:
        if queue is None:
            raise BrokerError("amqp:not-allowed", f"The operation is not supported on topic '{entity}'.")
        return queue

    def _renew_lock(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        expirations = [Timestamp(queue.renew(token)) for token in _tokens(body)]
        return 200, {"expirations": Array(expirations, 0x83)}

    def _update_disposition(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        status = body.get("disposition-status")
        for token in _tokens(body):
            if status == "completed":
                queue.complete(token)
            elif status == "abandoned":
                queue.abandon(token)
            elif status == "defered":
                queue.defer(token)
            elif status == "suspended":
                queue.dead_letter(
                    token,
                    str(body.get("deadletter-reason") or ""),
                    str(body.get("deadletter-description") or ""),
                )
            else:
                raise BrokerError("com.microsoft:argument-error", f"Unknown disposition-status {status!r}.")
        return 200, {}

    def _peek(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        entries = queue.peek(
            int(body.get("from-sequence-number", 1)),
            int(body.get("message-count", 1)),
            body.get("session-id") if isinstance(body.get("session-id"), str) else None,
        )
        if not entries:
            return 204, None
        return 200, {"messages": [{"message": encode_delivery(entry, queue)} for entry in entries]}

    def _receive_by_sequence_number(
        self, entity: str, queue: MessageQueue | None, body: dict[str, Any]
    ) -> Response:
        queue = self._need_queue(entity, queue)
        session_id = body.get("session-id") if isinstance(body.get("session-id"), str) else None
        entries = queue.lock_deferred(
            [int(seq) for seq in body.get("sequence-numbers", [])], None, session_id
        )
        messages = []
        for entry in entries:
            item: dict[str, Any] = {"message": encode_delivery(entry, queue)}
            if body.get("receiver-settle-mode") == 0 and entry.lock_token is not None:
                queue.complete(entry.lock_token)
            else:
                item["lock-token"] = entry.lock_token
            messages.append(item)
        return 200, {"messages": messages}

    def _schedule(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        messages = [AmqpMessage.parse(item["message"]) for item in body.get("messages", [])]
        numbers = self.broker.send(entity, messages)  # each carries x-opt-scheduled-enqueue-time
        return 200, {"sequence-numbers": Array([Long(n) for n in numbers], 0x81)}

    def _cancel_scheduled(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        self.broker.cancel_scheduled(entity, [int(seq) for seq in body.get("sequence-numbers", [])])
        return 200, {}

    def _get_session_state(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        session_id = _session(body)
        queue.session_lock_of(session_id)
        return 200, {"session-state": queue.session_states.get(session_id)}

    def _set_session_state(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        state = body.get("session-state")
        queue.set_session_state(_session(body), bytes(state) if state is not None else None)
        return 200, {}

    def _renew_session_lock(self, entity: str, queue: MessageQueue | None, body: dict[str, Any]) -> Response:
        queue = self._need_queue(entity, queue)
        return 200, {"expiration": Timestamp(queue.renew_session(_session(body)))}

    def _get_message_sessions(
        self, entity: str, queue: MessageQueue | None, body: dict[str, Any]
    ) -> Response:
        queue = self._need_queue(entity, queue)
        skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
        since = body.get("last-updated-time")
        # The SDK sends DateTime.MaxValue (year 10000) for "every session with messages or state".
        updated_after = int(since) if isinstance(since, int) and since < _DATETIME_MAX_MS else None
        sessions = queue.session_ids(updated_after)[skip : skip + top]
        if not sessions:
            return 204, None
        return 200, {"skip": Int(skip + len(sessions)), "sessions-ids": Array(sessions, 0xB1)}
