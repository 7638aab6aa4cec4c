"""Count the storage requests an operation sends, on the real SDK pipelines.

``ClaimCheck.from_settings(request_hook=...)`` hands every Blob and Table service client a
``raw_request_hook``: azure-core calls it from its pipeline (after the retry policy, so once per
attempt actually sent) with the request about to go on the wire. ``StorageRequests`` records each
one as a short label (``table insert registry``, ``blob put blob``...) so a test can assert a ceiling
on the round trips of intake and consumption, and the bench can print them.

Parallel requests are counted like sequential ones: the count is requests, not latency. The
critical path is counted apart, in ``Tally.steps``: with ``StorageRequests(pace=seconds)`` the hook
holds every request that long before it goes on the wire, so a request sent after another one's
answer starts at least ``pace`` later, while requests sent at once start within the thread pool's
hand-over time of each other (milliseconds, far below a generous ``pace``). Steps are the groups of
requests that started within ``pace`` of their group's first one.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# The table name is the first path segment after the account (path-style, as Azurite) or the first
# (host-style, as Azure); a point operation adds "(PartitionKey='..',RowKey='..')".
_TABLE_PATH = re.compile(r"/(?P<table>[A-Za-z][A-Za-z0-9]{2,62})(?P<keys>\(.*\))?$")
_BLOB_COMP = {
    ("PUT", "block"): "stage block",
    ("PUT", "blocklist"): "commit block list",
    ("PUT", "tags"): "set tags",
    ("GET", "tags"): "get tags",
}


def describe(service: str, method: str, url: str, headers: Any) -> str:
    """A short, stable label for one storage request (never its keys, values or query signature)."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    query = parse_qs(parts.query)
    if service == "table":
        if path.endswith("/$batch"):
            return "table batch"
        match = _TABLE_PATH.search(path)
        table = match["table"] if match else "?"
        keyed = bool(match and match["keys"] and match["keys"] != "()")
        operation = {
            "GET": "get" if keyed else "query",
            "POST": "insert",
            "PUT": "replace" if "If-Match" in headers else "upsert",
            "MERGE": "merge",
            "PATCH": "merge",
            "DELETE": "delete",
        }.get(method, method.lower())
        return f"table {operation} {table}"
    comp = query.get("comp", [""])[0]
    if comp:
        return f"blob {_BLOB_COMP.get((method, comp), f'{method.lower()} {comp}')}"
    return {
        "PUT": "blob put blob",
        "GET": "blob get blob",
        "HEAD": "blob get properties",
        "DELETE": "blob delete",
    }.get(method, f"blob {method.lower()}")


@dataclass
class Tally:
    """The requests sent while one ``StorageRequests.measure`` block ran."""

    labels: list[str] = field(default_factory=list)
    started: list[float] = field(default_factory=list)  # monotonic seconds, when each request was handed over
    pace: float = 0.0

    @property
    def total(self) -> int:
        return len(self.labels)

    @property
    def steps(self) -> int:
        """Sequential steps (measured only with a ``pace``; see the module's docstring)."""
        if not self.pace:
            raise ValueError("steps are measured only by StorageRequests(pace=...)")
        steps, opened = 0, float("-inf")
        for started in sorted(self.started):
            if started - opened >= self.pace:
                steps, opened = steps + 1, started
        return steps

    def by_label(self) -> Counter[str]:
        return Counter(self.labels)

    def summary(self) -> str:
        return ", ".join(f"{count} x {label}" for label, count in sorted(self.by_label().items()))


class StorageRequests:
    """Pass ``hook`` as ``ClaimCheck.from_settings(request_hook=...)``; then ``with measure() as tally``."""

    def __init__(self, *, pace: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._open: list[Tally] = []
        self._pace = pace

    def hook(self, service: str, request: Any) -> None:
        """azure-core's ``raw_request_hook`` (a ``PipelineRequest``), tagged with the client's service."""
        started = time.monotonic()
        http = request.http_request
        label = describe(service, http.method, http.url, http.headers)
        with self._lock:
            for tally in self._open:
                tally.labels.append(label)
                tally.started.append(started)
        if self._pace:
            time.sleep(self._pace)

    @contextmanager
    def measure(self) -> Iterator[Tally]:
        tally = Tally(pace=self._pace)
        with self._lock:
            self._open.append(tally)
        try:
            yield tally
        finally:
            with self._lock:
                self._open.remove(tally)
