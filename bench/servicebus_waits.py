"""Where the Service Bus consumer's two waits go: the credit refill and the completion round trip.

The end to end pipeline of ``bench.servicebus`` is latency-bound: its consumer (prefetch 200,
``receive_messages(200)``, ``complete_message`` each) waits for the SDK's credit refill every 200
messages and for one round trip per completion. This measures both from both sides:

- inside the emulator (a subprocess of this script with probes around its frame handling, the
  completion's fast path included, and its socket writes): a receiver's ``flow`` granting credit
  -> the first and the last of its transfers written, with the pump and commit inside that; a
  ``disposition`` read -> its settled echo written;
- in the consumer (probes on pyamqp's ``flow`` and ``_message_received``, the SDK's internals, so
  this may need updating with the SDK): the flow sent -> the first and the 200th message decoded,
  and ``complete_message`` as the application sees it.

Latency percentiles, not a throughput figure; the emulator's own code is not changed. Usage:
``python -m bench.servicebus_waits [--messages 5000]``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from servicebus_emulator.server import connection_string

from bench.servicebus import CONFIG
from local.ports import free_port, wait_for_port

_ns = time.perf_counter_ns
PREFETCH = 200


def _wrap(cls: type, name: str, around: Callable[..., Any]) -> None:
    """Replace ``cls.name`` by ``around(original, *args)`` (a probe; this process only)."""
    original = getattr(cls, name)
    setattr(cls, name, lambda *args, **kwargs: around(original, *args, **kwargs))


def _serve_with_probes(out: Path, emulator_args: list[str]) -> int:
    """Run the emulator CLI with probes; write what they saw to ``out`` once it stops."""
    from servicebus_emulator import __main__ as cli
    from servicebus_emulator.connection import AmqpConnection
    from servicebus_emulator.session import Session

    open_refills: dict[int, list[int]] = {}  # connection -> [flow read, first written, last written]
    open_settles: dict[int, int] = {}  # connection -> disposition read
    seen: dict[str, list[list[int]]] = {"refill": [], "settle": []}

    def on_frame(
        original: Callable[..., None], session: Session, name: str, fields: Any, payload: Any
    ) -> None:
        key, now = id(session.host), _ns()
        if name == "flow" and fields.get("handle") is not None and int(fields.get("link_credit") or 0) > 1:
            seen["refill"].append(open_refills.pop(key, [now, 0, 0]))
            open_refills[key] = [now, 0, 0]
        elif name == "disposition" and fields.get("role"):
            open_settles.setdefault(key, now)
        original(session, name, fields, payload)

    def on_accepted(original: Callable[..., None], session: Session, *args: Any) -> None:
        open_settles.setdefault(id(session.host), _ns())  # a completion read by the fast path
        original(session, *args)

    def write_output(original: Callable[..., None], connection: AmqpConnection) -> None:
        transfers = sum(len(frame) for frame in connection._out) > 1000
        original(connection)
        key, now = id(connection), _ns()
        if key in open_settles:
            seen["settle"].append([open_settles.pop(key), now])
        refill = open_refills.get(key)
        if refill is not None and transfers:
            refill[1] = refill[1] or now
            refill[2] = now

    _wrap(Session, "on_frame", on_frame)
    _wrap(Session, "on_accepted", on_accepted)
    _wrap(AmqpConnection, "write_output", write_output)
    code = cli.main(emulator_args)
    seen["refill"] += open_refills.values()
    out.write_text(json.dumps(seen))
    return code


def _consume(url: str, messages: int) -> dict[str, list[float]]:
    """Send ``messages`` in batches of 100, then receive and complete them as the pipeline does."""
    from azure.servicebus._pyamqp import client as amqp_client
    from azure.servicebus._pyamqp import receiver as amqp_receiver

    flows: list[float] = []
    decoded: list[float] = []

    def flow(original: Callable[..., Any], link: Any, **kwargs: Any) -> Any:
        if kwargs.get("link_credit"):
            flows.append(time.perf_counter())
        return original(link, **kwargs)

    def received(original: Callable[..., Any], client: Any, frame: Any, message: Any) -> Any:
        decoded.append(time.perf_counter())
        return original(client, frame, message)

    _wrap(amqp_receiver.ReceiverLink, "flow", flow)
    _wrap(amqp_client.ReceiveClient, "_message_received", received)
    completes: list[float] = []
    body = b"x" * 1024
    with ServiceBusClient.from_connection_string(url) as client:
        with client.get_queue_sender("throughput") as sender:
            for _ in range(0, messages, 100):
                sender.send_messages([ServiceBusMessage(body) for _ in range(100)])
        with client.get_queue_receiver("throughput", prefetch_count=PREFETCH) as receiver:
            done = 0
            while done < messages:
                batch = receiver.receive_messages(max_message_count=PREFETCH, max_wait_time=5)
                for message in batch:
                    started = time.perf_counter()
                    receiver.complete_message(message)
                    completes.append((time.perf_counter() - started) * 1e6)
                done += len(batch)
    first, last = [], []
    for i, sent in enumerate(flows[1:], 1):  # the first flow opens the link, before any message
        until = flows[i + 1] if i + 1 < len(flows) else float("inf")
        start, end = bisect.bisect_left(decoded, sent), bisect.bisect_left(decoded, until)
        if end - start >= PREFETCH:  # a full refill (the last may be short)
            first.append((decoded[start] - sent) * 1e3)
            last.append((decoded[start + PREFETCH - 1] - sent) * 1e3)
    return {"first": first, "last": last, "complete": completes}


def _line(label: str, values: list[float], unit: str) -> str:
    if len(values) < 2:
        return f"  {label:44} (too few samples: {len(values)})"
    p90 = statistics.quantiles(values, n=10)[-1]
    return (
        f"  {label:44} p50 {statistics.median(values):8.2f} {unit}  p90 {p90:8.2f} {unit}  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--serve-with-probes", type=Path, help=argparse.SUPPRESS)  # the emulator subprocess
    args, rest = parser.parse_known_args()
    if args.serve_with_probes is not None:
        sys.exit(_serve_with_probes(args.serve_with_probes, rest))
    with tempfile.TemporaryDirectory() as scratch:
        config, probes = Path(scratch) / "Config.json", Path(scratch) / "probes.json"
        config.write_text(json.dumps(CONFIG))
        port = free_port()
        command = [sys.executable, "-m", "bench.servicebus_waits", "--serve-with-probes", str(probes)]
        command += ["--config", str(config), "--port", str(port), "--management-port", "0"]
        command += ["--data", str(Path(scratch) / "data")]
        emulator = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            wait_for_port(port)
            client = _consume(connection_string(port, None), args.messages)
        finally:
            emulator.terminate()
            emulator.wait(timeout=60)
        seen = json.loads(probes.read_text())
    refills = [r for r in seen["refill"] if r[1]]
    load = os.getloadavg()[0]
    print(f"Service Bus consumer waits ({args.messages} x 1 KiB, prefetch {PREFETCH}, load {load:.2f})")
    print("refill (flow granting credit -> transfers)")
    print(_line("broker: flow read -> first transfer written", [(r[1] - r[0]) / 1e6 for r in refills], "ms"))
    print(_line("broker: flow read -> last transfer written", [(r[2] - r[0]) / 1e6 for r in refills], "ms"))
    print(_line("SDK: flow sent -> first message decoded", client["first"], "ms"))
    print(_line("SDK: flow sent -> 200th message decoded", client["last"], "ms"))
    print("completion (disposition -> settled echo)")
    print(_line("broker: disposition read -> echo written", [(b - a) / 1e3 for a, b in seen["settle"]], "us"))
    print(_line("SDK: complete_message", client["complete"], "us"))


if __name__ == "__main__":
    main()
