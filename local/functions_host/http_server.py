"""The HTTP side of the host: routes ``/{routePrefix}/{route}`` to HTTP-triggered functions.

A stdlib ThreadingHTTPServer is enough for local use: each request runs on its own thread with a real
``func.HttpRequest``; a function that raises gets a generic 500 (the details stay in the host log).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import azure.functions as func

from local.functions_host.app_loader import HttpFunction
from local.functions_host.invocation import invoke

logger = logging.getLogger(__name__)

# The Functions host accepts request bodies up to 100 MB (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT default).
DEFAULT_MAX_BODY_BYTES = 100 * 1024 * 1024

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
                params = {name: value for name, value in match.groupdict().items() if value is not None}
                return route.function, params
        return 405 if path_matched else 404


class _RequestTooLarge(Exception):
    pass


class FunctionsHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], routes: RouteTable, max_body_bytes: int) -> None:
        super().__init__(address, _Handler)
        self.routes = routes
        self.max_body_bytes = max_body_bytes

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="functions-http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: FunctionsHttpServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http %s", format % args)

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        resolved = self.server.routes.resolve(self.command, url.path)
        if isinstance(resolved, int):
            # The body stays unread, so this keep-alive connection cannot carry another request.
            self.close_connection = True
            self._send_json(resolved, {"error": "not_found" if resolved == 404 else "method_not_allowed"})
            return
        function, route_params = resolved
        try:
            body = self._read_body()
        except _RequestTooLarge:
            self.close_connection = True
            self._send_json(
                413,
                {
                    "error": "payload_too_large",
                    "message": f"request bodies are limited to {self.server.max_body_bytes} bytes",
                },
            )
            return
        except ValueError as error:
            self.close_connection = True
            self._send_json(400, {"error": "bad_request", "message": str(error)})
            return
        request = func.HttpRequest(
            method=self.command,
            url=f"http://{self.headers.get('Host', 'localhost')}{self.path}",
            headers=dict(self.headers.items()),
            params=dict(parse_qsl(url.query, keep_blank_values=True)),
            route_params=route_params,
            body=body,
        )
        try:
            response = invoke(function.handler, {function.arg_name: request})
        except Exception:
            logger.exception("function %s failed", function.name)
            self._send_json(
                500, {"error": "internal_error", "message": "the function failed; see the host log"}
            )
            return
        self._send_response(_as_response(response, function.name))

    def _read_body(self) -> bytes:
        limit = self.server.max_body_bytes
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked(limit)
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            return b""
        if not length_text.isdigit():
            raise ValueError("Content-Length must be a whole number")
        length = int(length_text)
        if length > limit:
            raise _RequestTooLarge
        return self.rfile.read(length)

    def _read_chunked(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise ValueError("malformed chunked body") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers carry nothing we use
                return b"".join(chunks)
            total += size
            if total > limit:
                raise _RequestTooLarge
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _send_json(self, status: int, document: dict[str, Any]) -> None:
        self._send_response(
            func.HttpResponse(json.dumps(document), status_code=status, mimetype="application/json")
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
