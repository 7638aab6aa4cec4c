"""The HTTP side of the host: routes ``/{routePrefix}/{route}`` to HTTP-triggered functions.

A stdlib ThreadingHTTPServer is enough for local use: each connection runs on its own thread with a real
``func.HttpRequest``; a function that raises gets a generic 500 (the details stay in the host log).

Under load it degrades like a service, not like a socket: a deep accept queue absorbs bursts, at most
``max_concurrent_requests`` functions run at once with a bounded number waiting, and what exceeds that
(or the connection cap) gets a JSON 503 with Retry-After. Every answer the host gives itself, including
the standard library's 400/414/431 for malformed requests, uses the API's error shape
``{"error": code, "message": text}``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func
from claimcheck.settings import INLINE_REQUEST_MAX_BYTES, host_request_body_limit

from local.functions_host.app_loader import HttpFunction
from local.functions_host.host_config import HttpOptions
from local.functions_host.invocation import invoke
from local.functions_host.request_body import (
    RequestTooLarge,
    UnreadBodyRequest,
    declared_length,
    discard,
    read_body,
    too_large_answer,
)

logger = logging.getLogger(__name__)

# The body limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT) when none is given: the one derivation infra/ and
# local/stack.py use, for the default inline cap. Intake enforces its cap from Content-Length before the
# body is read, so the host need only take the cap plus a 1 MiB multipart margin (a document of exactly the
# cap sent as multipart still reaches the app); anything above is refused before it is buffered.
DEFAULT_MAX_BODY_BYTES = host_request_body_limit(INLINE_REQUEST_MAX_BYTES)

# Connections the kernel queues before accept() (socketserver's default of 5 drops bursts).
LISTEN_BACKLOG = 1024
# Idle or slow connections give their thread back after this many seconds without a byte.
CONNECTION_IDLE_TIMEOUT = 30.0
# What a refused request is told to wait before trying again.
RETRY_AFTER_SECONDS = 1

_PARAMETER = re.compile(r"\{(?P<star>\*)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::[^}?]*)?(?P<optional>\?)?\}")


@dataclass(frozen=True)
class Route:
    function: HttpFunction
    pattern: re.Pattern[str]

    @classmethod
    def compile(cls, function: HttpFunction, route_prefix: str) -> Route:
        template = "/".join(part for part in (route_prefix, function.route.strip("/")) if part)
        regex = ""
        position = 0
        for match in _PARAMETER.finditer(template):
            regex += re.escape(template[position : match.start()])
            body = ".+" if match["star"] else "[^/]+"
            group = f"(?P<{match['name']}>{body})"
            if match["optional"]:
                # An optional trailing segment also makes the slash before it optional.
                if regex.endswith("/"):
                    regex = regex[:-1] + f"(?:/{group})?"
                else:
                    regex += group + "?"
            else:
                regex += group
            position = match.end()
        regex += re.escape(template[position:])
        return cls(function, re.compile(f"^/{regex}/?$", re.IGNORECASE))


class RouteTable:
    def __init__(self, functions: Sequence[HttpFunction], route_prefix: str) -> None:
        self.routes = [Route.compile(function, route_prefix) for function in functions]

    def resolve(self, method: str, path: str) -> tuple[HttpFunction, dict[str, str]] | int:
        """The function and route params for a request, or 404 / 405."""
        path_matched = False
        for route in self.routes:
            match = route.pattern.match(path)
            if match is None:
                continue
            path_matched = True
            methods = route.function.methods
            if methods is None or method in methods:
                # Matched on the raw path, so an encoded '/' stays inside its segment; then decoded as
                # Azure does ("order%3A42" reaches the function as "order:42").
                params = {
                    name: unquote(value) for name, value in match.groupdict().items() if value is not None
                }
                return route.function, params
        return 405 if path_matched else 404


class InvocationSlots:
    """At most ``running`` invocations at once and at most ``outstanding`` admitted (running + waiting).

    ``acquire`` waits for a free slot when the request is admitted, and refuses at once (False) when
    ``outstanding`` requests are already held: the caller answers 503 instead of piling up threads.
    """

    def __init__(self, running: int, outstanding: int) -> None:
        self._running_limit = running
        self._outstanding_limit = max(outstanding, running)
        self._running = 0
        self._outstanding = 0
        self._condition = threading.Condition()

    def acquire(self) -> bool:
        with self._condition:
            if self._outstanding >= self._outstanding_limit:
                return False
            self._outstanding += 1
            while self._running >= self._running_limit:
                self._condition.wait()
            self._running += 1
            return True

    def release(self) -> None:
        with self._condition:
            self._running -= 1
            self._outstanding -= 1
            self._condition.notify()


class FunctionsHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        routes: RouteTable,
        max_body_bytes: int,
        limits: HttpOptions | None = None,
        *,
        reuse_port: bool = False,
    ) -> None:
        # Several host instances listen on one port with SO_REUSEPORT: the kernel spreads the incoming
        # connections over them (instances.py). Read by server_bind, during the constructor.
        self.allow_reuse_port = reuse_port
        super().__init__(address, _Handler)
        limits = limits or HttpOptions()
        self.routes = routes
        self.max_body_bytes = max_body_bytes
        self.slots = InvocationSlots(limits.max_concurrent_requests, limits.max_outstanding_requests)
        # Idle keep-alive connections hold a thread but no slot; this caps the threads themselves.
        self._connections = threading.BoundedSemaphore(2 * limits.max_outstanding_requests)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._connections.acquire(blocking=False):
            logger.debug("http: connection cap reached; answered 503")
            _refuse_connection(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="functions-http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: FunctionsHttpServer
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_IDLE_TIMEOUT
    # Set when an over-limit body's Expect: 100-continue got no 100 (the client then sends no body).
    _body_withheld = False

    def __getattr__(self, name: str) -> Any:
        # Every method token reaches the router, which answers 405 for a method no function accepts
        # (the standard library would answer 501 in HTML for one it has no do_<METHOD> for).
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (malformed request line, 414, 431...) as the API's JSON."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            # Unparseable request line: still answer with a status line and headers a client can read.
            self.request_version = "HTTP/1.1"
        self._send_json(code, {"error": _error_code(phrase), "message": message or phrase})

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http %s", format % args)

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        resolved = self.server.routes.resolve(self.command, url.path)
        if isinstance(resolved, int):
            # The body stays unread, so this keep-alive connection cannot carry another request.
            self.close_connection = True
            if resolved == 404:
                self._send_json(404, {"error": "not_found", "message": f"no function serves {url.path}"})
            else:
                message = f"{url.path} does not accept {self.command}"
                self._send_json(405, {"error": "method_not_allowed", "message": message})
            return
        function, route_params = resolved
        try:
            body = read_body(self.headers, self.rfile, self.server.max_body_bytes)
        except RequestTooLarge:
            self._refuse_too_large()
            self._discard_rest()
            return
        except ValueError as error:
            self.close_connection = True
            self._send_json(400, {"error": "bad_request", "message": str(error)})
            return
        # None: a Content-Length over the limit, left unread (the function sees the headers only).
        request_type = func.HttpRequest if body is not None else UnreadBodyRequest
        request = request_type(
            method=self.command,
            url=f"http://{self.headers.get('Host', 'localhost')}{self.path}",
            headers=combined_headers(self.headers.items()),
            params=dict(parse_qsl(url.query, keep_blank_values=True)),
            route_params=route_params,
            body=body or b"",
        )
        if body is None:
            self.close_connection = True  # the unread body stays on the connection
        if not self.server.slots.acquire():
            self._send_json(
                503,
                {"error": "service_busy", "message": "too many requests in progress; retry shortly"},
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
            return
        try:
            response = invoke(function.handler, {function.arg_name: request})
        except RequestTooLarge:
            self._refuse_too_large()
            self._discard_rest()
            return
        except Exception:
            logger.exception("function %s failed", function.name)
            self._send_json(
                500, {"error": "internal_error", "message": "the function failed; see the host log"}
            )
            return
        finally:
            self.server.slots.release()
        self._send_response(_as_response(response, function.name))
        if body is None:
            self._discard_rest()

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue`` with a body over the limit: no 100, so the client never sends the
        body and gets the final answer instead (RFC 9110 §10.1.1)."""
        length = declared_length(self.headers)
        if length is not None and length > self.server.max_body_bytes:
            self._body_withheld = True
            return True
        return super().handle_expect_100()

    def _refuse_too_large(self) -> None:
        self.close_connection = True
        self._send_json(413, too_large_answer(self.server.max_body_bytes))

    def _discard_rest(self) -> None:
        if not self._body_withheld:  # else no 100 was sent, so the client sends no body
            discard(self.connection, self.rfile, declared_length(self.headers))

    def _send_json(
        self, status: int, document: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send_response(
            func.HttpResponse(
                json.dumps(document), status_code=status, mimetype="application/json", headers=headers
            )
        )

    def _send_response(self, response: func.HttpResponse) -> None:
        body = response.get_body() or b""
        self.send_response(response.status_code)
        headers = {name.lower(): (name, value) for name, value in response.headers.items()}
        if "content-type" not in headers and response.mimetype:
            charset = f"; charset={response.charset}" if response.charset else ""
            self.send_header("Content-Type", f"{response.mimetype}{charset}")
        for lowered, (name, value) in headers.items():
            if lowered not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def combined_headers(fields: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request's header fields as the Functions host hands them to the worker: one entry per name
    (case-insensitive), repeated field lines joined with a comma as RFC 9110 §5.3 combines them (ASP.NET
    Core's StringValues, which the host converts to the worker's one string per header). Keeping only the
    last line, as a plain dict does, would let a request carrying two Authorization headers authenticate
    with one of them; joined, the gate sees one malformed credential and refuses it (401)."""
    combined: dict[str, tuple[str, list[str]]] = {}
    for name, value in fields:
        combined.setdefault(name.lower(), (name, []))[1].append(value)
    return {name: ",".join(values) for name, values in combined.values()}


def _error_code(phrase: str) -> str:
    """'Request Header Fields Too Large' -> 'request_header_fields_too_large'."""
    return re.sub(r"[^a-z0-9]+", "_", phrase.lower()).strip("_")


def _refuse_connection(connection: socket.socket) -> None:
    """Answer a connection over the cap from the accept thread without ever blocking it."""
    body = json.dumps({"error": "service_busy", "message": "too many open connections; retry shortly"})
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: {RETRY_AFTER_SECONDS}\r\nConnection: close\r\n\r\n"
    )
    # Read what the client already sent, so that closing does not reset the connection under it.
    with contextlib.suppress(OSError):
        connection.setblocking(False)
        while connection.recv(65536):
            pass
    with contextlib.suppress(OSError):
        connection.send((head + body).encode())


def _as_response(result: Any, function_name: str) -> func.HttpResponse:
    """The worker turns a returned str/bytes into a 200 and None into a 204; so do we."""
    if isinstance(result, func.HttpResponse):
        return result
    if result is None:
        return func.HttpResponse(status_code=204)
    if isinstance(result, str | bytes):
        return func.HttpResponse(result, status_code=200)
    logger.error("function %s returned %s, not an HttpResponse", function_name, type(result).__name__)
    return func.HttpResponse(
        json.dumps({"error": "internal_error", "message": "the function failed; see the host log"}),
        status_code=500,
        mimetype="application/json",
    )
