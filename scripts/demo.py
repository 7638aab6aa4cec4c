"""`make demo`: the claim-check journey of the sample contracts on the local stack, end to end.

Starts Azurite, the Service Bus emulator and the Functions host; sends the samples from
samples/contracts/ over HTTP (text and PDF, one over the inline threshold, one tampered after upload,
one forged for another tenant) plus an invalid envelope straight to the queue; follows each one from
the intake receipt through the queue and the consumer's steps to its result and the subscriptions
that received the result event, or to the dead-letter queue with its reason. Prints one progress
line per observed event (and a live table on a terminal), then the journey and summary tables; stops
the stack and exits 0 only if every document ended as expected.

Two cases need the consumer to wait: the demo holds the work item's session (a session receiver of
its own, exactly what a second consumer would do) while it tampers with the stored object or copies
the envelope, then releases the session to the consumer.
"""

from __future__ import annotations

import os
import signal
import sys

if __name__ == "__main__":
    # Ctrl-C while the SDKs load (before anything has started): one line, not an import traceback.
    signal.signal(signal.SIGINT, lambda *_: (print("interrupted", file=sys.stderr), os._exit(130)))

import argparse
import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver, ServiceBusSubQueue
from azure.storage.blob import BlobServiceClient
from claimcheck.envelope import parse_envelope
from claimcheck.settings import DOCUMENTS_QUEUE, PAYLOAD_CONTAINER, RESULTS_TOPIC
from claimcheck.telemetry import CONSUME_SPAN, WORK_ITEM_ID
from rich.console import Console
from rich.live import Live

from local.identity import SigningKey, TokenMinter, identity_named
from local.processes import interrupt_handler
from local.stack import INTERRUPTED, TELEMETRY_DIR, LocalStack, start_stack, uninterruptible
from scripts.demo_cases import COMPLETED, Case, demo_cases
from scripts.demo_report import (
    FULL_JOURNEY_WIDTH,
    HostLogEvent,
    dead_letter_text,
    intake_text,
    journey_table,
    make_console,
    parse_host_log_line,
    print_tables,
    progress_line,
    status_text,
)
from scripts.telemetry_files import StageTiming, read_spans, stage_timings

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "contracts"
SUBSCRIPTIONS = ("audit", "notifications", "review", "contracts")
PROCESSING_TIMEOUT_SECONDS = 60.0
POLL_INTERVAL_SECONDS = 0.25


class Demo:
    def __init__(self, stack: LocalStack, console: Console) -> None:
        self.stack = stack
        self.console = console
        self.http = requests.Session()
        # The demo calls the API as local-producer (granted acme, globex and initech), like any caller.
        self.http.headers.update(stack.auth_headers("local-producer"))
        self.bus = ServiceBusClient.from_connection_string(stack.servicebus_connection_string)
        self.blobs = BlobServiceClient.from_connection_string(stack.storage_connection_string)
        self.started = time.monotonic()
        self._host_log = HostLogTail(stack.work_dir / "functions-host.log")
        # Receivers stay open for the whole run: opening and closing one costs about half a second,
        # while a peek on an open one continues after the last message it saw.
        self._dead_letter_queue = self.bus.get_queue_receiver(
            DOCUMENTS_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        )
        self._subscriptions = {
            name: self.bus.get_subscription_receiver(RESULTS_TOPIC, name) for name in SUBSCRIPTIONS
        }
        self._dead: dict[str, tuple[str, str]] = {}
        self._received: dict[str, list[str]] = {}
        self._live: Live | None = None

    def close(self) -> None:
        for receiver in (self._dead_letter_queue, *self._subscriptions.values()):
            receiver.close()
        self.bus.close()
        self.blobs.close()
        self.http.close()

    def run(self, cases: list[Case]) -> None:
        """Send every case, following the ones already sent in between, then follow until all ended."""
        with self._live_table(cases):
            for case in cases:
                self.send(case)
                self.observe(cases)
            deadline = time.monotonic() + PROCESSING_TIMEOUT_SECONDS
            while any(case.outcome is None for case in cases) and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL_SECONDS)
                self.observe(cases)
            self.observe(cases)  # late cleanup lines and payload states of the last ones
            for case in cases:
                if case.outcome is None:
                    case.outcome = f"timed out ({case.state})"

    @contextlib.contextmanager
    def _live_table(self, cases: list[Case]) -> Iterator[None]:
        """A live journey table on a terminal; without one, the progress lines say it all."""
        if not self.console.is_terminal:
            yield
            return
        with Live(
            journey_table(cases, self.console.width), console=self.console, refresh_per_second=4
        ) as self._live:
            yield
        self._live = None

    def say(self, case: Case, stage: str, text: str) -> None:
        line = progress_line(time.monotonic() - self.started, case.name, stage, text)
        # One line each where they fit (a log, a wide terminal); wrapped at words on a narrow terminal
        # rather than cut or left to the terminal's own wrapping.
        wide = self.console.width >= FULL_JOURNEY_WIDTH
        self.console.print(line, soft_wrap=wide, highlight=False, markup=False)

    # --- sending --------------------------------------------------------------------------------

    def send(self, case: Case) -> None:
        if case.how == "http":
            self._submit(case)
        elif case.how == "tampered":
            with self._held_session(case.work_item_id) as hold:
                self._submit(case)
                ref = parse_envelope(self._queued_body(hold)).payload_ref
                self.blobs.get_blob_client(PAYLOAD_CONTAINER, str(ref)).upload_blob(
                    b"Tampered: not the document that was registered.\n", overwrite=True
                )
                self.say(case, "tampered", "stored object overwritten while the demo held the session")
            self.say(case, "queue", "session released to the consumer")
        elif case.how == "forged":
            self._send_forged(case)
        else:
            body = b'{"schema": "claimcheck.envelope", "work_item_id": "' + case.work_item_id.encode() + b'"}'
            self._send_raw(case, body)
            case.intake = "sent straight to the queue"
            self.say(case, "queue", "envelope without its required fields sent straight to the queue")

    def _submit(self, case: Case, *, tenant: str | None = None, work_item_id: str | None = None) -> None:
        headers = {
            "X-Tenant-Id": tenant or case.tenant,
            "X-Purpose": "contract-review",
            "X-Classification": case.classification,
            "X-Work-Item-Id": work_item_id or case.work_item_id,
            "Content-Type": case.content_type,
        }
        if case.signer == "foreign":
            headers["Authorization"] = f"Bearer {self._foreign_token()}"
        response = self.http.post(
            f"{self.stack.api_url}/documents",
            data=(SAMPLES / case.sample).read_bytes(),
            headers=headers,
            timeout=60,
        )
        if response.status_code != 202:
            case.intake, case.outcome = f"HTTP {response.status_code}", response.json().get("error", "?")
            self.say(case, "intake", f"{case.intake} {case.outcome}")
            return
        receipt = response.json()["receipt"]
        case.intake = intake_text(receipt)
        case.state = "queued"
        queued = f"{case.intake} → queue, message {str(receipt['message_id'])[:16]}…"
        if work_item_id is not None:  # the source of a forged copy, not the case's own work item
            self.say(case, "intake", f"source {work_item_id} ({tenant}): {queued}")
            return
        case.message_id, case.transport = receipt["message_id"], receipt["transport"]
        self.say(case, "intake", queued)

    def _foreign_token(self) -> str:
        """Right issuer, audience, roles and kid, but signed by a key of the demo's own: a forgery."""
        forger = TokenMinter(SigningKey.generate(), base_url=self.stack.minter.base_url)
        claims = forger.claims(identity_named("local-producer"))
        return forger.sign(claims, kid=self.stack.minter.key.kid)

    def _send_forged(self, case: Case) -> None:
        """Submit a document for globex, copy its envelope, and send the copy as tenant acme."""
        original = f"wi-demo-{uuid.uuid4().hex[:12]}"
        with self._held_session(original) as hold:
            self._submit(case, tenant="globex", work_item_id=original)
            envelope = parse_envelope(self._queued_body(hold))
        forged = dataclasses.replace(envelope, tenant_id=case.tenant, work_item_id=case.work_item_id)
        outbound = forged.to_message(priority="normal", document_type="contract", review_required=False)
        self._send_raw(
            case,
            outbound.body,
            properties={key: value for key, value in outbound.application_properties.items()},
        )
        case.intake = f"envelope of {original} (globex), tenant set to acme"
        self.say(case, "queue", f"{case.intake}, sent straight to the queue")

    def _send_raw(self, case: Case, body: bytes, properties: dict[str | bytes, Any] | None = None) -> None:
        with self.bus.get_queue_sender(DOCUMENTS_QUEUE) as sender:
            sender.send_messages(
                ServiceBusMessage(
                    body,
                    session_id=case.work_item_id,
                    message_id=case.work_item_id,
                    content_type="application/json",
                    application_properties=properties,
                )
            )
        case.state, case.message_id = "queued", case.work_item_id

    def _held_session(self, session_id: str) -> ServiceBusReceiver:
        """A receiver holding the session: the consumer cannot take it until the receiver closes."""
        receiver = self.bus.get_queue_receiver(DOCUMENTS_QUEUE, session_id=session_id)
        receiver.peek_messages(max_message_count=1)  # opening the link accepts (locks) the session
        return receiver

    @staticmethod
    def _queued_body(hold: ServiceBusReceiver) -> bytes:
        [message] = hold.peek_messages(max_message_count=1)
        return b"".join(message.body)

    # --- following ------------------------------------------------------------------------------

    def observe(self, cases: list[Case]) -> None:
        """One look at every source; a progress line for each thing that changed."""
        sent = [case for case in cases if case.state != "not sent"]
        for event in self._host_log.new_events():
            self._apply_host_log(sent, event)
        dead = self._dead_letters()
        newly_completed = False
        for case in sent:
            self._poll_status(case)
            if case.outcome is not None:
                continue
            if case.work_item_id in dead:
                case.outcome, case.dead_letter_description = dead[case.work_item_id]
                self.say(case, "dead-letter", dead_letter_text(case))
            elif case.state == COMPLETED:
                case.outcome, newly_completed = COMPLETED, True
        if newly_completed:
            self._record_subscriptions(sent)
        if self._live is not None:
            self._live.update(journey_table(cases, self.console.width))

    def _apply_host_log(self, cases: list[Case], event: HostLogEvent) -> None:
        for case in cases:
            if event.kind == "retry" and event.subject == case.message_id:
                case.retries.append(event.detail)
                self.say(case, "retry", f"consumer asked for a retry {event.detail} (host log)")
            elif event.kind == "completed" and event.subject == case.work_item_id:
                case.consumer_completed = True
                self.say(
                    case, "consumer", f"completed {event.detail}: result written, event published (host log)"
                )
            elif event.kind == "cleanup" and event.subject == case.work_item_id:
                case.cleanup = f"payload removed ({event.detail})"
                self.say(case, "cleanup", f"{case.cleanup} (host log)")

    def _poll_status(self, case: Case) -> None:
        response = self.http.get(f"{self.stack.api_url}/work-items/{case.work_item_id}", timeout=30)
        if response.status_code != 200:
            return  # a forged or invalid envelope has no work item of its own
        view = response.json()
        before = status_text(case)
        case.state, case.payload_state, case.result = view["state"], view["payload_state"], view["result"]
        if status_text(case) != before:
            self.say(case, "status", f"{status_text(case)} (status API)")

    def _dead_letters(self) -> dict[str, tuple[str, str]]:
        """Reason and description of each dead-lettered work item so far (peeked, nothing consumed)."""
        for message in self._dead_letter_queue.peek_messages(max_message_count=250):
            self._dead[str(message.session_id)] = (
                str(message.dead_letter_reason),
                str(message.dead_letter_error_description),
            )
        return self._dead

    def _record_subscriptions(self, cases: list[Case]) -> None:
        """Which subscriptions received each completed case's result event (peeked, nothing consumed)."""
        for name, receiver in self._subscriptions.items():
            for message in receiver.peek_messages(max_message_count=250):
                work_item_id = json.loads(b"".join(message.body))["summary"]["work_item_id"]
                self._received.setdefault(work_item_id, []).append(name)
        for case in cases:
            subscriptions = tuple(self._received.get(case.work_item_id, ()))
            if case.outcome == COMPLETED and subscriptions != case.subscriptions:
                case.subscriptions = subscriptions
                self.say(case, "results", f"result event received by {', '.join(subscriptions) or 'none'}")


class HostLogTail:
    """The consumer events appended to the Functions host log since the last look."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._partial = b""

    def new_events(self) -> list[HostLogEvent]:
        with self._path.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        parsed = (parse_host_log_line(line.decode(errors="replace")) for line in lines)
        return [event for event in parsed if event is not None]


def stage_timings_of(stack: LocalStack, cases: list[Case]) -> list[StageTiming]:
    """Per-stage timings of the demo's documents from the host's spans (exported within about a second
    of each stage: wait up to a few seconds for the last documents' spans)."""
    directory = stack.work_dir / TELEMETRY_DIR
    ids = [case.work_item_id for case in cases]
    deadline = time.monotonic() + 5
    while True:
        spans = read_spans(directory)
        consumed = {span.attributes.get(WORK_ITEM_ID) for span in spans if span.name == CONSUME_SPAN}
        if consumed >= {case.work_item_id for case in cases if case.outcome == COMPLETED}:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.25)
    return stage_timings(spans, ids)


def main(argv: list[str] | None = None) -> int:
    """The demo; Ctrl-C at any point stops the stack, says so in one line and exits 130."""
    parser = argparse.ArgumentParser(
        prog="python -m scripts.demo", description="make demo: " + (__doc__ or "")
    )
    parser.add_argument(
        "--exit-code-on-interrupt",
        type=int,
        default=INTERRUPTED,
        help="exit code after a Ctrl-C (default: %(default)s). `make demo` passes 0: make dies of the "
        "same Ctrl-C (so the shell still sees 130) and, for a child's non-zero code, would add a "
        "'make: *** [demo] Interrupt' line of its own",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, interrupt_handler)  # KeyboardInterrupt, never lost in a fork
    console = make_console()
    console.print("Starting the local stack:")
    starting = time.monotonic()
    try:
        stack = start_stack(progress=lambda line: console.print(line, markup=False, highlight=False))
    except KeyboardInterrupt:  # start_stack stopped what it had started
        return _interrupted(code=args.exit_code_on_interrupt)
    console.print(
        f"Local stack up in {time.monotonic() - starting:.1f} s: API {stack.api_url}, host log "
        f"{stack.work_dir / 'functions-host.log'}",
        markup=False,
    )
    cases = demo_cases()
    interrupted = False
    try:
        demo = Demo(stack, console)
        try:
            demo.run(cases)
            print_tables(console, cases, stage_timings_of(stack, cases))
        finally:
            with uninterruptible(), contextlib.suppress(Exception):
                # After a Ctrl-C inside an SDK call its links may be half closed: closing them is
                # best effort, and the stack is stopped below whatever they say.
                demo.close()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with uninterruptible():
            console.print("Stopping the local stack…")
            stopping = time.monotonic()
            stack.stop()
    took = f" in {time.monotonic() - stopping:.1f} s"
    if interrupted:
        return _interrupted(took, code=args.exit_code_on_interrupt)
    console.print(f"Local stack stopped{took}.")
    failures = [case for case in cases if not case.as_expected]
    if failures:
        console.print(f"[red]{len(failures)} document(s) did not end as expected.[/]")
        return 1
    console.print("[green]Every document ended as expected.[/]")
    return 0


def _interrupted(took: str = "", *, code: int = INTERRUPTED) -> int:
    sys.stdout.flush()
    print(f"interrupted; stack stopped{took}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
