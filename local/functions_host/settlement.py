"""The host's ``Settlement`` gRPC service, which the binding extension's ServiceBusMessageActions calls.

On Azure the Service Bus extension serves this service (the proto ships in the Python extension
package) and settles through the receiver that owns the message or session; errors come back as
``StatusCode.UNKNOWN`` carrying the exception text, an unknown lock token as ``FAILED_PRECONDITION``
"LockToken ... not found." — the extension turns either into its ``SettlementError``. We do the same,
backed by our listener's receivers.

The extension's ServiceBusMessageActions is a process-wide singleton that reads ``--host``, ``--port``
and ``--functions-grpc-max-message-length`` from the worker's command line. Our worker is this very
process, so one server per process serves every host in it, and its address is appended to
``sys.argv`` before the singleton is first built (later options win in argparse, so the local host's
own ``--port`` for HTTP does not interfere). The host's own options are dropped from it: the extension's
parser abbreviates, so the host's ``--functions a b`` would read as ``--functions-grpc-max-message-length a``.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
from azure.servicebus import ServiceBusReceivedMessage, ServiceBusReceiver, ServiceBusSession
from azurefunctions.extensions.bindings.protos import settlement_pb2 as pb
from azurefunctions.extensions.bindings.protos import settlement_pb2_grpc as pb_grpc
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp

logger = logging.getLogger(__name__)

# The Functions host starts the Python worker with int.MaxValue here.
GRPC_MAX_MESSAGE_LENGTH = 2**31 - 1
_SERVER_THREADS = 8


@dataclass
class HeldMessage:
    """A message an invocation is processing, and how it was settled (None: not yet)."""

    receiver: ServiceBusReceiver
    message: ServiceBusReceivedMessage
    settled_with: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class HeldSession:
    receiver: ServiceBusReceiver
    release_requested: threading.Event = field(default_factory=threading.Event)

    @property
    def session(self) -> ServiceBusSession:
        return self.receiver.session


class SettlementRegistry:
    """Which receiver owns each lock token and session while an invocation runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, HeldMessage] = {}
        self._sessions: dict[str, HeldSession] = {}

    @contextmanager
    def holding(
        self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage
    ) -> Iterator[HeldMessage]:
        token = str(message.lock_token)
        held = HeldMessage(receiver, message)
        with self._lock:
            self._messages[token] = held
        try:
            yield held
        finally:
            with self._lock:
                self._messages.pop(token, None)

    @contextmanager
    def holding_session(self, receiver: ServiceBusReceiver) -> Iterator[HeldSession]:
        held = HeldSession(receiver)
        session_id = receiver.session.session_id
        with self._lock:
            self._sessions[session_id] = held
        try:
            yield held
        finally:
            with self._lock:
                if self._sessions.get(session_id) is held:
                    del self._sessions[session_id]

    def message(self, lock_token: str) -> HeldMessage | None:
        with self._lock:
            return self._messages.get(lock_token)

    def session(self, session_id: str) -> HeldSession | None:
        with self._lock:
            return self._sessions.get(session_id)


def settle(held: HeldMessage, outcome: str, action: Callable[[], None]) -> None:
    """Run one settlement; recorded only once the broker accepted it. A second one fails as the SDK
    would (the message is already settled)."""
    with held.lock:
        if held.settled_with is not None:
            raise RuntimeError(f"the message has already been settled ({held.settled_with})")
        action()
        held.settled_with = outcome


class SettlementService(pb_grpc.SettlementServicer):  # type: ignore[misc]  # untyped generated stubs
    def __init__(self, registry: SettlementRegistry) -> None:
        self._registry = registry

    def Complete(self, request: pb.CompleteRequest, context: grpc.ServicerContext) -> Empty:
        held = self._message(request.locktoken, context)
        return self._run(
            context, lambda: settle(held, "complete", lambda: held.receiver.complete_message(held.message))
        )

    def Abandon(self, request: pb.AbandonRequest, context: grpc.ServicerContext) -> Empty:
        held = self._message(request.locktoken, context)
        return self._run(
            context, lambda: settle(held, "abandon", lambda: held.receiver.abandon_message(held.message))
        )

    def Defer(self, request: pb.DeferRequest, context: grpc.ServicerContext) -> Empty:
        held = self._message(request.locktoken, context)
        return self._run(
            context, lambda: settle(held, "defer", lambda: held.receiver.defer_message(held.message))
        )

    def Deadletter(self, request: pb.DeadletterRequest, context: grpc.ServicerContext) -> Empty:
        held = self._message(request.locktoken, context)
        reason = request.deadletterReason.value if request.HasField("deadletterReason") else None
        description = (
            request.deadletterErrorDescription.value
            if request.HasField("deadletterErrorDescription")
            else None
        )

        def dead_letter() -> None:
            held.receiver.dead_letter_message(held.message, reason=reason, error_description=description)

        return self._run(context, lambda: settle(held, "deadletter", dead_letter))

    def RenewMessageLock(self, request: pb.RenewMessageLockRequest, context: grpc.ServicerContext) -> Empty:
        held = self._message(request.locktoken, context)
        return self._run(context, lambda: held.receiver.renew_message_lock(held.message))

    def GetSessionState(
        self, request: pb.GetSessionStateRequest, context: grpc.ServicerContext
    ) -> pb.GetSessionStateResponse:
        held = self._session(request.sessionId, context)
        state: list[bytes] = []
        self._run(context, lambda: state.append(bytes(held.session.get_state() or b"")))
        return pb.GetSessionStateResponse(sessionState=state[0])

    def SetSessionState(self, request: pb.SetSessionStateRequest, context: grpc.ServicerContext) -> Empty:
        held = self._session(request.sessionId, context)
        return self._run(context, lambda: held.session.set_state(request.sessionState))

    def ReleaseSession(self, request: pb.ReleaseSessionRequest, context: grpc.ServicerContext) -> Empty:
        # As on Azure, the session is released once the current invocation returns.
        self._session(request.sessionId, context).release_requested.set()
        return Empty()

    def RenewSessionLock(
        self, request: pb.RenewSessionLockRequest, context: grpc.ServicerContext
    ) -> pb.RenewSessionLockResponse:
        held = self._session(request.sessionId, context)
        locked_until = Timestamp()
        self._run(context, lambda: locked_until.FromDatetime(held.session.renew_lock()))
        return pb.RenewSessionLockResponse(lockedUntil=locked_until)

    def _message(self, lock_token: str, context: grpc.ServicerContext) -> HeldMessage:
        held = self._registry.message(lock_token)
        if held is None:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"LockToken {lock_token} not found.")
        return held

    def _session(self, session_id: str, context: grpc.ServicerContext) -> HeldSession:
        held = self._registry.session(session_id)
        if held is None:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"SessionId {session_id} not found.")
        return held

    @staticmethod
    def _run(context: grpc.ServicerContext, action: Callable[[], Any]) -> Empty:
        try:
            action()
        except Exception as error:  # the host's service reports any failure as Unknown with its text
            logger.info("settlement call failed: %s", type(error).__name__)
            _abort(context, grpc.StatusCode.UNKNOWN, f"{type(error).__name__}: {error}")
        return Empty()


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    context.abort(code, details)
    raise AssertionError("context.abort returned")  # it raises; this line is never reached


@dataclass(frozen=True)
class SettlementServer:
    registry: SettlementRegistry
    address: str
    server: grpc.Server

    def worker_arguments(self) -> list[str]:
        """The command-line arguments the Functions host starts the worker with (what the extension reads)."""
        host, port = self.address.rsplit(":", 1)
        return [
            "--host",
            host,
            "--port",
            port,
            "--functions-grpc-max-message-length",
            str(GRPC_MAX_MESSAGE_LENGTH),
        ]


_server: SettlementServer | None = None
_server_lock = threading.Lock()


def settlement_server() -> SettlementServer:
    """The process's Settlement service on a free loopback port, started on first use."""
    global _server
    with _server_lock:
        if _server is None:
            registry = SettlementRegistry()
            options = [
                ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_LENGTH),
                ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_LENGTH),
            ]
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=_SERVER_THREADS), options=options)
            pb_grpc.add_SettlementServicer_to_server(SettlementService(registry), server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            atexit.register(server.stop, None)
            _server = SettlementServer(registry, f"127.0.0.1:{port}", server)
            sys.argv[1:] = _server.worker_arguments()
            logger.info("settlement service (gRPC) on %s", _server.address)
        return _server
