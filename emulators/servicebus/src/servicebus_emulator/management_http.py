"""The HTTP management plane (ATOM) on its own port, as in Microsoft's emulator (5300).

``ServiceBusAdministrationClient`` sends requests signed with the connection string's Shared Access
Signature (entry ids spell ``Subscriptions`` and ``Rules`` as Azure does; the JavaScript client reads
the names from them): ``GET`` of ``/{queue-or-topic}``, ``/{topic}/subscriptions/{name}``,
``/{topic}/subscriptions/{name}/rules/{rule}`` and the listings ``/$Resources/queues``,
``/$Resources/topics``, ``/{topic}/subscriptions`` and ``.../rules`` (paged by ``$skip``/``$top``);
``PUT`` of the same paths creates (``If-Match: *``: updates) from a description (``descriptions``),
``DELETE`` deletes. 409 for a create of what exists, 404 for an update or delete of what does not.

The port answers HTTPS and plain HTTP alike: a connection whose first byte opens a TLS handshake
(0x16; no HTTP request line starts with it) is served over TLS with the certificate of ``tls``, so
the stock administration clients, which always speak HTTPS, work unmodified; any other is plain HTTP.

It runs on the broker's asyncio loop, so it reads the broker's state without locks. Requests are
bounded (16 KiB of head, 1 MiB of body, 30 s idle); a malformed one is answered 400 and the
connection closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from servicebus_emulator import atom, descriptions
from servicebus_emulator.broker import Broker, Topic
from servicebus_emulator.cbs import SharedAccessKey, check_token
from servicebus_emulator.config import QueueSettings
from servicebus_emulator.descriptions import ManagementError
from servicebus_emulator.model import now_ms
from servicebus_emulator.tls import Certificate

_LOG = logging.getLogger(__name__)
MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
IDLE_SECONDS = 30.0
MAX_PAGE = 100
TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a ClientHello
_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
}
_ENTRY_TYPE = "application/atom+xml;type=entry;charset=utf-8"
_FEED_TYPE = "application/atom+xml;type=feed;charset=utf-8"


@dataclass(frozen=True)
class Response:
    status: int
    body: str
    content_type: str = "application/xml; charset=utf-8"


class ManagementPlane:
    """Answers one request at a time from the broker's current state."""

    def __init__(self, broker: Broker, key: SharedAccessKey | None) -> None:
        self.broker = broker
        self.key = key
        self.started_ms = now_ms()

    def handle(
        self, method: str, target: str, headers: dict[str, str], scheme: str = "http", body: bytes = b""
    ) -> Response:
        status, reason = check_token(headers.get("authorization"), self.key)
        if status >= 300:
            return Response(401, atom.error(401, reason))
        split = urlsplit(target)
        segments = [unquote(part) for part in split.path.strip("/").split("/") if part]
        if method in ("PUT", "DELETE"):
            try:
                return self._write(
                    method, segments, headers, body, f"{scheme}://{headers.get('host', 'localhost')}"
                )
            except ManagementError as refused:
                return Response(refused.status, atom.error(refused.status, refused.detail))
        if method != "GET":
            return Response(405, atom.error(405, f"The method {method} is not served here."))
        query = {name: values[0] for name, values in parse_qs(split.query).items()}
        base = f"{scheme}://{headers.get('host', 'localhost')}"
        try:
            page = atom.Page(
                max(int(query.get("$skip", "0")), 0),
                min(max(int(query.get("$top", str(MAX_PAGE))), 1), MAX_PAGE),
                f"{base}{split.path}",
            )
        except ValueError:
            return Response(400, atom.error(400, "$skip and $top must be integers."))
        return self._route(segments, base, page)

    def _route(self, segments: list[str], base: str, page: atom.Page) -> Response:
        lowered = [segment.lower() for segment in segments]
        if lowered == ["$namespaceinfo"]:
            content = atom.namespace_info(self.broker.namespace, self.started_ms, self.broker.premium)
            return self._entry(f"{base}/$namespaceinfo", self.broker.namespace, content)
        if lowered == ["$resources", "queues"]:
            return self._queues(base, page)
        if lowered == ["$resources", "topics"]:
            return self._topics(base, page)
        if len(segments) == 1:
            return self._queue_or_topic(segments[0], base)
        if len(segments) >= 2 and lowered[1] == "subscriptions":
            topic = self.broker.topics.get(lowered[0])
            if topic is None:
                return _not_found(f"The messaging entity '{segments[0]}' could not be found.")
            if len(segments) == 2:
                return self._subscriptions(topic, base, page)
            return self._subscription_part(topic, segments[2:], lowered[2:], base, page)
        return _not_found(f"No management resource at '/{'/'.join(segments)}'.")

    # --- create, update, delete ----------------------------------------------------------------------

    def _write(
        self, method: str, segments: list[str], headers: dict[str, str], body: bytes, base: str
    ) -> Response:
        lowered = [segment.lower() for segment in segments]
        update = headers.get("if-match", "").strip() == "*"
        if len(segments) == 1:
            return self._write_entity(method, segments[0], update, headers, body, base)
        if (
            len(segments) in (3, 5)
            and lowered[1] == "subscriptions"
            and (len(segments) == 3 or lowered[3] == "rules")
        ):
            topic = self.broker.topics.get(lowered[0])
            if topic is None:
                raise _missing(segments[0])
            if len(segments) == 3:
                return self._write_subscription(method, topic, segments[2], update, headers, body, base)
            return self._write_rule(method, topic, segments[2], segments[4], update, body, base)
        raise ManagementError(404, f"No management resource at '/{'/'.join(segments)}'.")

    def _write_entity(
        self, method: str, name: str, update: bool, headers: dict[str, str], body: bytes, base: str
    ) -> Response:
        queue = self.broker.queues.get(name.lower())
        queue = queue if queue is not None and "/" not in queue.path else None
        topic = self.broker.topics.get(name.lower())
        if method == "DELETE":
            if queue is not None:
                self.broker.delete_queue(queue.name)
            elif topic is not None:
                self.broker.delete_topic(topic.name)
            else:
                raise _missing(name)
            return Response(200, "")
        self._check_change(name, queue is not None or topic is not None, update, child=False)
        node = descriptions.description(body)
        kind = descriptions.kind_of(node)
        size = self._size_limits()
        if kind == "QueueDescription" and topic is None:
            settings = descriptions.queue_settings(node, queue.settings if queue else None, size)
            self._check_forwarding(queue.name if queue else name, settings, headers)
            created = self.broker.put_queue(queue.name if queue else name, settings)
            content = atom.queue_description(self.broker, created, self.started_ms)
            return self._written(update, f"{base}/{created.name}", created.name, content)
        if kind == "TopicDescription" and queue is None:
            topic_settings = descriptions.topic_settings(node, topic.settings if topic else None, size)
            made = self.broker.put_topic(topic.name if topic else name, topic_settings)
            content = atom.topic_description(self.broker, made, self.started_ms)
            return self._written(update, f"{base}/{made.name}", made.name, content)
        raise descriptions.bad_request(f"A {kind} cannot create or update the entity '{name}'.")

    def _write_subscription(
        self,
        method: str,
        topic: Topic,
        name: str,
        update: bool,
        headers: dict[str, str],
        body: bytes,
        base: str,
    ) -> Response:
        existing = self.broker.subscription(topic.name, name)
        if method == "DELETE":
            if existing is None:
                raise _missing(f"{topic.name}/Subscriptions/{name}")
            self.broker.delete_subscription(topic.name, name)
            return Response(200, "")
        self._check_change(f"{topic.name}/Subscriptions/{name}", existing is not None, update, child=True)
        node = descriptions.description(body)
        if descriptions.kind_of(node) != "SubscriptionDescription":
            raise descriptions.bad_request(
                "A subscription is created or updated with a SubscriptionDescription."
            )
        settings = descriptions.queue_settings(
            node,
            existing.queue.settings if existing else None,
            self._size_limits(),
            subscription=True,
        )
        shown = existing.queue.name.rsplit("/", 1)[1] if existing else name
        self._check_forwarding(f"{topic.name}/Subscriptions/{shown}", settings, headers)
        rules = () if existing else (descriptions.default_rule(node),)
        made = self.broker.put_subscription(topic.name, shown, settings, rules)
        content = atom.subscription_description(self.broker, made.queue, self.started_ms)
        return self._written(update, f"{base}/{topic.name}/Subscriptions/{shown}", shown, content)

    def _write_rule(
        self,
        method: str,
        topic: Topic,
        subscription_name: str,
        name: str,
        update: bool,
        body: bytes,
        base: str,
    ) -> Response:
        subscription = self.broker.subscription(topic.name, subscription_name)
        if subscription is None:
            raise _missing(f"{topic.name}/Subscriptions/{subscription_name}")
        shown_subscription = subscription.queue.name.rsplit("/", 1)[1]
        existing = next((rule for rule in subscription.rules if rule.name.lower() == name.lower()), None)
        if method == "DELETE":
            if existing is None:
                raise _missing(f"{topic.name}/Subscriptions/{shown_subscription}/Rules/{name}")
            self.broker.delete_rule(topic.name, shown_subscription, existing.name)
            return Response(200, "")
        where = f"{topic.name}/Subscriptions/{shown_subscription}/Rules/{name}"
        self._check_change(where, existing is not None, update, child=True)
        node = descriptions.description(body)
        if descriptions.kind_of(node) != "RuleDescription":
            raise descriptions.bad_request("A rule is created or updated with a RuleDescription.")
        made = descriptions.rule(node, existing.name if existing else name)
        self.broker.put_rule(topic.name, shown_subscription, made)
        url = f"{base}/{topic.name}/Subscriptions/{shown_subscription}/Rules/{made.name}"
        return self._written(update, url, made.name, atom.rule_description(made, self.started_ms))

    def _size_limits(self) -> descriptions.SizeLimits:
        return descriptions.SizeLimits(self.broker.premium, self.broker.max_message_size // 1024)

    @staticmethod
    def _check_change(name: str, exists: bool, update: bool, *, child: bool) -> None:
        if update and not exists:
            raise _missing(name)
        if not update and exists:
            raise ManagementError(
                409,
                f"The messaging entity '{name}' already exists. SubCode=40900. Conflict. To know more visit "
                "https://aka.ms/sbResourceMgrExceptions.",
            )
        if not update:
            descriptions.check_name(name.rsplit("/", 1)[-1], "entity", child=child)

    def _check_forwarding(self, owner: str, settings: QueueSettings, headers: dict[str, str]) -> None:
        """A forward target must exist and not be the entity itself; as on Azure, the client proves
        it may send there with a signed token in a supplementary header."""
        for target, header in (
            (settings.forward_to, "servicebussupplementaryauthorization"),
            (settings.forward_dead_lettered_to, "servicebusdlqsupplementaryauthorization"),
        ):
            if target is None:
                continue
            if target.lower() == owner.lower():
                raise descriptions.bad_request(f"The entity '{owner}' cannot forward to itself.")
            if target.lower() not in self.broker.topics and (
                target.lower() not in self.broker.queues or "/" in target
            ):
                raise descriptions.bad_request(f"The forward target '{target}' does not exist.")
            status, reason = check_token(headers.get(header), self.key)
            if status >= 300:
                raise ManagementError(401, f"Forwarding to '{target}': {reason}")

    def _written(self, update: bool, url: str, title: str, content: str) -> Response:
        return Response(200 if update else 201, atom.entry(url, title, self.started_ms, content), _ENTRY_TYPE)

    # --- queues and topics -------------------------------------------------------------------------

    def _top_level_queues(self) -> list[str]:
        return [path for path in self.broker.queues if "/" not in path]

    def _queues(self, base: str, page: atom.Page) -> Response:
        items = []
        for path in self._top_level_queues():
            queue = self.broker.queues[path]
            content = atom.queue_description(self.broker, queue, self.started_ms)
            items.append((f"{base}/{queue.name}", queue.name, content))
        return Response(
            200, atom.feed(f"{base}/$Resources/queues", "Queues", self.started_ms, items, page), _FEED_TYPE
        )

    def _topics(self, base: str, page: atom.Page) -> Response:
        items = [
            (f"{base}/{topic.name}", topic.name, atom.topic_description(self.broker, topic, self.started_ms))
            for topic in self.broker.topics.values()
        ]
        return Response(
            200, atom.feed(f"{base}/$Resources/topics", "Topics", self.started_ms, items, page), _FEED_TYPE
        )

    def _queue_or_topic(self, name: str, base: str) -> Response:
        queue = self.broker.queues.get(name.lower())
        if queue is not None and "/" not in queue.path:
            content = atom.queue_description(self.broker, queue, self.started_ms)
            return self._entry(f"{base}/{queue.name}", queue.name, content)
        topic = self.broker.topics.get(name.lower())
        if topic is not None:
            content = atom.topic_description(self.broker, topic, self.started_ms)
            return self._entry(f"{base}/{topic.name}", topic.name, content)
        return _not_found(f"The messaging entity '{name}' could not be found.")

    # --- subscriptions and rules -------------------------------------------------------------------

    @staticmethod
    def _subscription_name(topic: Topic, index: int) -> str:
        return topic.subscriptions[index].queue.name.rsplit("/", 1)[1]

    def _subscriptions(self, topic: Topic, base: str, page: atom.Page) -> Response:
        items = []
        for index, subscription in enumerate(topic.subscriptions):
            name = self._subscription_name(topic, index)
            content = atom.subscription_description(self.broker, subscription.queue, self.started_ms)
            items.append((f"{base}/{topic.name}/Subscriptions/{name}", name, content))
        url = f"{base}/{topic.name}/Subscriptions"
        return Response(200, atom.feed(url, "Subscriptions", self.started_ms, items, page), _FEED_TYPE)

    def _subscription_part(
        self, topic: Topic, segments: list[str], lowered: list[str], base: str, page: atom.Page
    ) -> Response:
        index = next(
            (
                position
                for position in range(len(topic.subscriptions))
                if self._subscription_name(topic, position).lower() == lowered[0]
            ),
            None,
        )
        if index is None:
            return _not_found(
                f"The messaging entity '{topic.name}/Subscriptions/{segments[0]}' could not be found."
            )
        subscription, name = topic.subscriptions[index], self._subscription_name(topic, index)
        url = f"{base}/{topic.name}/Subscriptions/{name}"
        if len(segments) == 1:
            content = atom.subscription_description(self.broker, subscription.queue, self.started_ms)
            return self._entry(url, name, content)
        if lowered[1] != "rules" or len(segments) > 3:
            return _not_found(f"No management resource under '{url}'.")
        rules = [
            (f"{url}/Rules/{rule.name}", rule.name, atom.rule_description(rule, self.started_ms))
            for rule in subscription.rules
        ]
        if len(segments) == 2:
            return Response(200, atom.feed(f"{url}/Rules", "Rules", self.started_ms, rules, page), _FEED_TYPE)
        for rule_url, rule_name, content in rules:
            if rule_name.lower() == lowered[2]:
                return self._entry(rule_url, rule_name, content)
        return _not_found(
            f"The rule '{segments[2]}' of '{topic.name}/Subscriptions/{name}' could not be found."
        )

    def _entry(self, url: str, title: str, content: str) -> Response:
        return Response(200, atom.entry(url, title, self.started_ms, content), _ENTRY_TYPE)


def _missing(name: str) -> ManagementError:
    return ManagementError(404, f"The messaging entity '{name}' could not be found.")


def _not_found(detail: str) -> Response:
    return Response(404, atom.error(404, detail))


def _encode(response: Response, keep_alive: bool) -> bytes:
    body = response.body.encode("utf-8")
    head = (
        f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}\r\n"
        f"Content-Type: {response.content_type}\r\nContent-Length: {len(body)}\r\n"
        f"Server: local-servicebus\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes] | None:
    """Method, target and headers (lower-case names) of the next request; None at a clean end."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_SECONDS)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ValueError("the request ended before its headers did") from None
        return None
    except asyncio.LimitOverrunError:
        raise ValueError(f"request head larger than {MAX_HEAD} bytes") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ValueError("malformed header line")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY:
        raise ValueError(f"Content-Length must be an integer up to {MAX_BODY}")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise ValueError("chunked request bodies are not accepted")
    body = await asyncio.wait_for(reader.readexactly(int(length)), IDLE_SECONDS)
    return parts[0], parts[1], headers, body


class ManagementServer:
    """The listening socket and its open connections; ``close`` ends both."""

    def __init__(self, plane: ManagementPlane, listener: socket.socket) -> None:
        self.plane = plane
        self.listener = listener
        self.tasks: set[asyncio.Task[Any]] = set()
        self.transports: set[asyncio.Transport] = set()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def track(self, task: asyncio.Task[Any]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        # Aborted, not closed: a TLS close would wait for each idle client's close_notify.
        for transport in list(self.transports):
            transport.abort()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.listener.close()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _first_byte(sock: socket.socket) -> bytes:
    """The connection's first byte, left in the socket (peeked); b"" when the client closed."""
    loop = asyncio.get_running_loop()
    while True:
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(sock.fileno(), _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(sock.fileno())
        try:
            return sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            continue
        except ConnectionError:
            return b""


async def _exchange(
    plane: ManagementPlane, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, scheme: str
) -> None:
    """Answer the connection's requests one after the other until it closes or errs."""
    try:
        while True:
            try:
                request = await _read_request(reader)
            except (ValueError, TimeoutError) as exc:
                writer.write(_encode(Response(400, atom.error(400, f"Bad request: {exc}")), False))
                break
            if request is None:
                break
            method, target, headers, body = request
            try:
                response = plane.handle(method, target, headers, scheme, body)
            except Exception:  # a bug must cost this request only
                _LOG.exception("management request failed")
                response = Response(500, atom.error(500, "The emulator failed to answer."))
            keep_alive = headers.get("connection", "").lower() != "close"
            writer.write(_encode(response, keep_alive))
            await writer.drain()
            if not keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()


async def serve_management(
    plane: ManagementPlane, host: str, port: int, tls: Certificate | None = None
) -> ManagementServer:
    """Listen for management requests (HTTPS with ``tls``, and plain HTTP, on the same port); the
    caller awaits ``close()`` on the result."""
    loop = asyncio.get_running_loop()
    context = tls.server_context() if tls is not None else None
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    listener = socket.create_server((host, port), family=family)
    listener.setblocking(False)
    running = ManagementServer(plane, listener)

    async def connection(sock: socket.socket) -> None:
        try:
            first = await asyncio.wait_for(_first_byte(sock), IDLE_SECONDS)
            if not first:
                sock.close()
                return
            secure = context is not None and first[0] == TLS_HANDSHAKE
            reader = asyncio.StreamReader(limit=MAX_HEAD, loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            if secure:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, sock, ssl=context, ssl_handshake_timeout=IDLE_SECONDS
                )
            else:
                transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
        except (OSError, ssl.SSLError, TimeoutError):  # e.g. a client that does not trust the certificate
            sock.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        running.transports.add(transport)
        try:
            await _exchange(plane, reader, writer, "https" if secure else "http")
        finally:
            running.transports.discard(transport)

    async def accept() -> None:
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except OSError:  # out of descriptors, say: keep the listener, try again shortly
                _LOG.warning("management plane: accept failed", exc_info=True)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            running.track(loop.create_task(connection(sock)))

    running.track(loop.create_task(accept()))
    return running
