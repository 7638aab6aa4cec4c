"""`make chaos`: a burst of documents across tenants while a seeded schedule crashes the stack.

Starts a throwaway local stack (loopback only), submits documents over HTTP from a few client threads
while the main thread follows a seeded schedule that SIGKILLs and at once restarts the Functions host
or the Service Bus emulator, or freezes Azurite (SIGSTOP for a few seconds: a SIGKILLed Azurite forgets
writes it already acknowledged, see docs/resilience.md). A few poison messages go straight to the queue
and must be dead-lettered (invalid_envelope) — the only dead letters intended. Then it waits for the
stack to settle, runs a reconcile pass and prints:

    accepted / completed exactly once / dead-lettered (intended, by design, unintended) / orphans

and exits 1 on any loss (an accepted document not completed, or dead-lettered) or duplicate (more than
one result event for an accepted version), or an orphan left after the reconcile pass. Bounded in time:
the schedule runs ``--duration`` seconds and settling at most ``--settle`` seconds.

Clients retry like a well-behaved caller: after a 503 they wait Retry-After; when the host is down they
back off; when an answer was lost (host killed mid-request) they ask the status API whether the work
item exists before submitting again. A resubmission is a new version of the same work item, so an
earlier unacknowledged version may be dead-lettered by design (superseded or never confirmed): those
are counted apart, never as intended-only successes of an accepted document.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from claimcheck.outcome import compute_backoff
from claimcheck.settings import DOCUMENTS_QUEUE, RESULTS_TOPIC, SETTING_NAMES, Settings
from claimcheck.testing import InMemoryBus

from local.stack import LocalStack, start_stack

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "contracts"
# Tenants of the local identity the run calls the API as (local/identity: local-tests may use t-*).
CALLER = "local-tests"
TENANTS = ("t-chaos-a", "t-chaos-b", "t-chaos-c")
COMPONENTS = ("host", "emulator", "azurite")
# A short lease and visibility grace so that a run settles in about a minute after its last crash.
APP_SETTINGS = {SETTING_NAMES["claim_lease_seconds"]: "9", SETTING_NAMES["visibility_grace_seconds"]: "20"}


@dataclass(frozen=True)
class Options:
    seed: int = 1
    documents: int = 60
    poison: int = 3
    duration: float = 90.0
    faults: int = 6
    settle: float = 300.0
    clients: int = 4


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the burst starts
    component: str
    pause: float  # Azurite: how long it stays frozen


def schedule(options: Options) -> list[Fault]:
    """The seeded fault schedule: every component at least once when there are enough faults."""
    rng = random.Random(options.seed)
    components = [COMPONENTS[index % len(COMPONENTS)] for index in range(options.faults)]
    rng.shuffle(components)
    times = sorted(rng.uniform(0.1, 0.9) * options.duration for _ in components)
    return [
        Fault(at, component, rng.uniform(2.0, 6.0)) for at, component in zip(times, components, strict=True)
    ]


@dataclass
class Document:
    work_item_id: str
    tenant: str
    body: bytes
    classification: str
    accepted_version: int | None = None
    acknowledged_late: bool = False  # the 202 was lost, the status API showed the confirmed version
    attempts: int = 0
    refused: list[str] = field(default_factory=list)  # non-retryable answers (a bug if any)


def documents(options: Options) -> list[Document]:
    rng = random.Random(options.seed + 1)
    small = (SAMPLES / "service-agreement.txt").read_bytes()  # travels inline
    large = (SAMPLES / "master-agreement-large.txt").read_bytes()
    made = []
    for index in range(options.documents):
        copies = 65 if index % 10 == 5 else rng.randint(1, 6)  # every tenth ~3 MB, as in the report
        body = small if index % 3 == 0 and copies < 65 else large * copies
        body += f"\nchaos document {index}\n".encode()
        classification = "confidential" if index % 4 == 1 else "internal"
        made.append(
            Document(f"wi-chaos-{options.seed}-{index:04d}", TENANTS[index % 3], body, classification)
        )
    return made


class Client:
    """Submits one document until it is accepted, as a careful caller would (see the module doc)."""

    def __init__(self, stack: LocalStack, deadline: float) -> None:
        self._stack = stack
        self._deadline = deadline

    def submit(self, document: Document) -> None:
        failures = 0
        while time.monotonic() < self._deadline:
            document.attempts += 1
            try:
                response = requests.post(
                    f"{self._stack.api_url}/documents",
                    data=document.body,
                    headers={
                        **self._stack.auth_headers(CALLER),
                        "X-Tenant-Id": document.tenant,
                        "X-Purpose": "contract-review",
                        "X-Classification": document.classification,
                        "X-Work-Item-Id": document.work_item_id,
                        "Content-Type": "text/plain",
                    },
                    timeout=60,
                )
            except requests.RequestException:
                failures += 1
                confirmed = self._confirmed_version(document)
                if confirmed:  # the answer was lost, but the intake confirmed it: do not submit again
                    document.accepted_version, document.acknowledged_late = confirmed, True
                    return
                time.sleep(_backoff(failures))
                continue
            if response.status_code == 202:
                document.accepted_version = int(response.json()["receipt"]["version"])
                return
            if response.status_code == 503:
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            document.refused.append(f"{response.status_code} {response.text[:200]}")
            return

    def _confirmed_version(self, document: Document) -> int:
        """After a lost answer: the version the status API says was confirmed (0: none), once it answers."""
        failures = 0
        while time.monotonic() < self._deadline:
            try:
                response = requests.get(
                    f"{self._stack.api_url}/work-items/{document.work_item_id}",
                    headers=self._stack.auth_headers(CALLER),
                    timeout=30,
                )
            except requests.RequestException:
                failures += 1
                time.sleep(_backoff(failures))
                continue
            if response.status_code == 200:
                return int(response.json().get("version") or 0)
            if response.status_code == 404:
                return 0
            failures += 1
            time.sleep(_backoff(failures))
        return 0


def _backoff(failures: int) -> float:
    return compute_backoff(
        failures, base=timedelta(seconds=0.5), max_backoff=timedelta(seconds=4)
    ).total_seconds()


def _freeze(stack: LocalStack, seconds: float) -> None:
    os.killpg(stack.azurite.process.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.killpg(stack.azurite.process.pid, signal.SIGCONT)


def inject(stack: LocalStack, fault: Fault) -> None:
    """Crash one component and bring it back at once (Azurite: freeze, then thaw)."""
    if fault.component == "azurite":
        _freeze(stack, fault.pause)
    else:
        stack.kill(fault.component)  # type: ignore[arg-type]
        stack.start(fault.component)  # type: ignore[arg-type]


@dataclass
class Tally:
    accepted: int = 0
    acknowledged_late: int = 0
    not_accepted: list[str] = field(default_factory=list)
    completed_once: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    dead_intended: int = 0
    dead_by_design: Counter[str] = field(default_factory=Counter)  # unacknowledged earlier versions
    dead_unintended: list[str] = field(default_factory=list)
    orphans_removed: int = 0
    orphans_left: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.dead_unintended or self.not_accepted or self.orphans_left
        )

    def lines(self) -> list[str]:
        return [
            f"faults injected            {dict(self.faults)}",
            f"accepted                   {self.accepted}"
            f" (answer lost, confirmed by the status API: {self.acknowledged_late})",
            f"not accepted in time       {len(self.not_accepted)} {self.not_accepted[:5]}",
            f"completed exactly once     {self.completed_once}",
            f"lost                       {len(self.lost)} {self.lost[:5]}",
            f"duplicated                 {len(self.duplicated)} {self.duplicated[:5]}",
            f"dead-lettered, intended    {self.dead_intended} (poison messages)",
            f"dead-lettered, by design   {sum(self.dead_by_design.values())} {dict(self.dead_by_design)}"
            " (unacknowledged earlier versions)",
            f"dead-lettered, unintended  {len(self.dead_unintended)} {self.dead_unintended[:5]}",
            f"orphans after reconcile    {self.orphans_left} (removed by the pass: {self.orphans_removed})",
            "RESULT: " + ("OK, nothing lost or duplicated" if self.ok else "FAILED"),
        ]


def _send_poison(stack: LocalStack, count: int, seed: int) -> set[str]:
    ids = {f"poison-{seed}-{index}" for index in range(count)}
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus,
        bus.get_queue_sender(DOCUMENTS_QUEUE) as sender,
    ):
        for poison_id in sorted(ids):
            sender.send_messages(ServiceBusMessage(b'{"schema": "not an envelope"}', session_id=poison_id))
    return ids


def _status(stack: LocalStack, work_item_id: str) -> dict[str, Any] | None:
    try:
        response = requests.get(
            f"{stack.api_url}/work-items/{work_item_id}", headers=stack.auth_headers(CALLER), timeout=30
        )
    except requests.RequestException:
        return None
    return dict(response.json()) if response.status_code == 200 else None


def _settle(stack: LocalStack, accepted: list[Document], poison: set[str], timeout: float) -> None:
    """Wait until every accepted document is final and every poison message is dead-lettered."""
    deadline = time.monotonic() + timeout
    pending = {document.work_item_id for document in accepted}
    while pending and time.monotonic() < deadline:
        for work_item_id in sorted(pending):
            view = _status(stack, work_item_id)
            if view is not None and view["state"] in ("completed", "failed", "expired"):
                pending.discard(work_item_id)
        time.sleep(1)
    while time.monotonic() < deadline and not poison <= {sid for sid, _ in _dead_letters(stack)}:
        time.sleep(1)


def _peek_all(receiver: Any) -> list[Any]:
    found, next_sequence = [], 0
    while batch := receiver.peek_messages(max_message_count=250, sequence_number=next_sequence):
        found.extend(batch)
        next_sequence = max(message.sequence_number for message in batch) + 1
    return found


def _dead_letters(stack: LocalStack) -> list[tuple[str, dict[str, Any]]]:
    """(session id, envelope fields or {}) of every dead-lettered document message."""
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus,
        bus.get_queue_receiver(DOCUMENTS_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver,
    ):
        messages = _peek_all(receiver)
    found = []
    for message in messages:
        try:
            envelope = json.loads(b"".join(message.body))
        except ValueError:
            envelope = {}
        fields = envelope if isinstance(envelope, dict) else {}
        fields["_reason"] = message.dead_letter_reason
        found.append((str(message.session_id), fields))
    return found


def _result_events(stack: LocalStack) -> Counter[tuple[str, int]]:
    """How many result events the audit subscription holds per (work item, version)."""
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus,
        bus.get_subscription_receiver(RESULTS_TOPIC, "audit") as receiver,
    ):
        messages = _peek_all(receiver)
    counts: Counter[tuple[str, int]] = Counter()
    for message in messages:
        summary = json.loads(b"".join(message.body))["summary"]
        counts[(summary["work_item_id"], int(summary["version"]))] += 1
    return counts


def _reconcile(stack: LocalStack) -> tuple[int, int]:
    """One reconcile pass with no orphan grace (the run has settled); (removed, still there)."""
    from claimcheck import ClaimCheck

    settings = replace(Settings.from_env({}), orphan_grace_seconds=1)
    time.sleep(1.5)
    claimcheck = ClaimCheck.from_settings(
        settings, storage_connection=stack.storage_connection_string, bus=InMemoryBus()
    )
    report = claimcheck.reconciler.run()
    left = claimcheck.reconciler.run()
    return len(report.orphans_removed), len(left.orphans_removed) + len(left.orphans_waiting)


def tally(stack: LocalStack, docs: list[Document], poison: set[str], faults: Counter[str]) -> Tally:
    result = Tally(faults=faults)
    accepted = [document for document in docs if document.accepted_version is not None]
    result.accepted = len(accepted)
    result.acknowledged_late = sum(document.acknowledged_late for document in accepted)
    result.not_accepted = [document.work_item_id for document in docs if document.accepted_version is None]
    result.not_accepted += [
        f"{document.work_item_id}: {document.refused[0]}" for document in docs if document.refused
    ]
    events = _result_events(stack)
    by_id = {document.work_item_id: document for document in docs}
    for document in accepted:
        view = _status(stack, document.work_item_id) or {}
        count = events[(document.work_item_id, document.accepted_version or 0)]
        if (
            view.get("state") == "completed"
            and view.get("version") == document.accepted_version
            and count == 1
        ):
            result.completed_once += 1
        elif count > 1:
            result.duplicated.append(f"{document.work_item_id} ({count} results)")
        else:
            result.lost.append(f"{document.work_item_id} ({view.get('state')}, {count} results)")
    for session_id, fields in _dead_letters(stack):
        owner = by_id.get(session_id)
        if session_id in poison:
            result.dead_intended += 1
        elif owner is not None and fields.get("payload_version") != owner.accepted_version:
            result.dead_by_design[str(fields["_reason"])] += 1
        else:
            result.dead_unintended.append(
                f"{session_id} v{fields.get('payload_version')}: {fields['_reason']}"
            )
    result.orphans_removed, result.orphans_left = _reconcile(stack)
    return result


def run(options: Options, *, out: Any = sys.stdout) -> Tally:
    plan = schedule(options)
    docs = documents(options)
    print(
        f"chaos: seed {options.seed}, {len(docs)} documents, {options.poison} poison messages, "
        f"{len(plan)} faults over {options.duration:.0f} s",
        file=out,
        flush=True,
    )
    with start_stack(app_settings=APP_SETTINGS) as stack:
        poison = _send_poison(stack, options.poison, options.seed)
        started = time.monotonic()
        client = Client(stack, deadline=started + options.duration + options.settle)
        faults: Counter[str] = Counter()
        spacing = options.duration * 0.8 / max(1, len(docs))
        with ThreadPoolExecutor(max_workers=options.clients) as pool:
            futures = []
            for index, document in enumerate(docs):  # the burst, spread over most of the window

                def later(document: Document = document, at: float = started + index * spacing) -> None:
                    time.sleep(max(0.0, at - time.monotonic()))
                    client.submit(document)

                futures.append(pool.submit(later))
            for fault in plan:  # faults from this (main) thread: a child dies with the thread that started it
                time.sleep(max(0.0, started + fault.at - time.monotonic()))
                print(
                    f"chaos: t={time.monotonic() - started:5.1f} s  {fault.component}: "
                    + (f"freeze {fault.pause:.1f} s" if fault.component == "azurite" else "SIGKILL, restart"),
                    file=out,
                    flush=True,
                )
                inject(stack, fault)
                faults[fault.component] += 1
            for future in futures:
                future.result()
        print(f"chaos: burst done after {time.monotonic() - started:.0f} s; settling", file=out, flush=True)
        _settle(stack, [d for d in docs if d.accepted_version is not None], poison, options.settle)
        result = tally(stack, docs, poison, faults)
    for line in result.lines():
        print(line, file=out, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = Options()
    parser.add_argument("--seed", type=int, default=defaults.seed, help="fault schedule seed (%(default)s)")
    parser.add_argument("--documents", type=int, default=defaults.documents, help="documents (%(default)s)")
    parser.add_argument("--faults", type=int, default=defaults.faults, help="faults injected (%(default)s)")
    parser.add_argument(
        "--duration", type=float, default=defaults.duration, help="seconds of burst and faults (%(default)s)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=defaults.settle,
        help="longest wait for the stack to settle afterwards, seconds (%(default)s)",
    )
    args = parser.parse_args(argv)
    options = replace(
        defaults,
        seed=args.seed,
        documents=args.documents,
        faults=args.faults,
        duration=args.duration,
        settle=args.settle,
    )
    return 0 if run(options).ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
