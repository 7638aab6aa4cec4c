"""Storage taken down under a running local stack: stopped, or stopped with its table port answering
as an overloaded Table service does (503 ServerBusy)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from local.stack import LocalStack


class BusyTableService(BaseHTTPRequestHandler):
    """Answers every request as an overloaded Table service does (503 ServerBusy), never a row."""

    def _busy(self) -> None:
        body = json.dumps({"odata.error": {"code": "ServerBusy", "message": {"value": "busy"}}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json;odata=minimalmetadata")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_MERGE = do_DELETE = _busy

    def log_message(self, *_: object) -> None:  # quiet
        pass


@contextmanager
def storage_down(stack: LocalStack, how: str) -> Iterator[None]:
    """Azurite stopped with its data flushed (a SIGKILLed Azurite can lose tables it created moments
    before), then started again on the same ports; ``how`` "busy": its table port answers 503 meanwhile,
    "unreachable": nothing answers."""
    stack.taken_down.add("azurite")
    stack.azurite.stop(flush=True)
    busy = None
    if how == "busy":
        busy = ThreadingHTTPServer(("127.0.0.1", stack.azurite.table_port), BusyTableService)
        threading.Thread(target=busy.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        if busy is not None:
            busy.shutdown()
            busy.server_close()
        stack.start("azurite")
