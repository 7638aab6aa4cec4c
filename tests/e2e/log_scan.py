"""The log-hygiene scan of the local stack: no payload bytes, keys, SAS tokens, bearer tokens or
signatures in any log file the stack writes, nor in any span or metric it exports.

Two callers: tests/e2e/test_logs.py scans right after making the stack log its own markers, and the
session's ``stack`` fixture scans every log once more when the stack has stopped, so everything every
other e2e test made the stack log is covered whatever the test order (a leak there fails the run as
a teardown error). Tests register the unique strings they sent (markers, token parts) in
``SESSION_NEEDLES`` so that the end-of-session scan looks for them too.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from servicebus_emulator.server import DEFAULT_KEY, connection_string

from local.azurite import ACCOUNT_KEY
from local.stack import TELEMETRY_DIR, LocalStack

SECRET_SHAPES = ("AccountKey=", ACCOUNT_KEY, "SharedAccessKey=", DEFAULT_KEY.key, "sig=", "Bearer ey")
# A JWT: base64url JSON header ('{"' encodes as eyJ), base64url JSON claims, signature.
JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")
# A SAS signature in any form a URL takes in a log: plain (``&sig=``), percent-encoded once or twice
# (``%26sig%3D``, ``%2526sig%253D``, ...), or JSON-escaped (``\u0026sig=``); the value is base64 (an
# HMAC-SHA256, 43-44 characters, possibly percent-encoded). Direct-upload grants carry one.
GRANT_SHAPE = re.compile(
    r"(?:[?&]|%(?:25)*(?:3F|26)|\\u0026)sig(?:=|%(?:25)*3D)(?:[A-Za-z0-9+/_-]|%(?:25)*(?:2B|2F|3D)){32,}",
    re.IGNORECASE,
)

# Markers and token parts tests sent to the stack this session; scanned for again at session end.
SESSION_NEEDLES: list[str] = []


def forms_of(marker: str) -> list[str]:
    """The marker as text and as it reads inside base64 (envelopes carry inline payloads that way) at
    each of the three byte alignments: the part of each encoding that depends on the marker alone."""
    raw = marker.encode()
    forms = [marker]
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
        forms.append(encoded[4 if offset else 0 : -4])
    return forms


def banners_of(stack: LocalStack) -> set[str]:
    """The emulator's start-up lines: its own connection string with its public development key, for
    AMQP and then the management plane (emulators/servicebus/src/servicebus_emulator/__main__.py).

    Known exception, left out of the scan and reported: only those exact lines are dropped; the key
    anywhere else still fails the scan."""
    (management_port,) = stack.emulator.other_ports
    return {
        connection_string(stack.emulator.port, DEFAULT_KEY),
        connection_string(management_port, DEFAULT_KEY) + "  (management)",
    }


def stack_logs(work_dir: Path, banners: set[str]) -> dict[Path, str]:
    """Every log file under the stack's folder: host, emulator, token issuer and Azurite (run with
    --silent, so its log holds start-up lines, never requests; data files are not logs), and every
    exported span and metric (the host's OTLP JSON lines under telemetry/)."""
    paths = [*work_dir.rglob("*.log"), *(work_dir / TELEMETRY_DIR).glob("*.jsonl*")]
    return {
        path: "\n".join(
            line
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if line not in banners
        )
        for path in paths
    }


def leaks(logs: dict[Path, str], work_dir: Path, needles: list[str]) -> list[str]:
    """Each (log, needle) found, and each log holding a JWT; empty when the logs are clean."""
    found = [
        f"{path.relative_to(work_dir)}: {needle!r}"
        for path, text in logs.items()
        for needle in (*needles, *SECRET_SHAPES)
        if needle in text
    ]
    found += [f"{path.relative_to(work_dir)}: a JWT" for path, text in logs.items() if JWT_SHAPE.search(text)]
    found += [
        f"{path.relative_to(work_dir)}: a SAS signature"
        for path, text in logs.items()
        if GRANT_SHAPE.search(text)
    ]
    return found
