"""What the e2e tests do to and read from the stack: submit over HTTP, poll status, read the bus.

Every HTTP call carries a bearer token of the local issuer for ``TEST_IDENTITY`` (local/identity/),
whose access-table grant covers every tenant id starting with ``t-``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusSubQueue

from local.stack import LocalStack

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "contracts"
FINAL_STATES = frozenset({"completed", "failed", "expired"})
SUBSCRIPTIONS = ("audit", "notifications", "review", "contracts")
TEST_IDENTITY = "local-tests"


def auth(stack: LocalStack, identity: str = TEST_IDENTITY) -> dict[str, str]:
    """The Authorization header of ``identity`` (a fresh token from the stack's local issuer)."""
    return stack.auth_headers(identity)


def submit(
    stack: LocalStack,
    document: bytes,
    *,
    tenant: str,
    content_type: str = "text/plain",
    purpose: str = "contract-review",
    classification: str = "internal",
    work_item_id: str | None = None,
    if_match: int | None = None,
) -> dict[str, Any]:
    headers = {
        **auth(stack),
        "X-Tenant-Id": tenant,
        "X-Purpose": purpose,
        "X-Classification": classification,
        "Content-Type": content_type,
    }
    if work_item_id is not None:
        headers["X-Work-Item-Id"] = work_item_id
    if if_match is not None:
        headers["If-Match"] = str(if_match)
    response = requests.post(f"{stack.api_url}/documents", data=document, headers=headers, timeout=60)
    assert response.status_code == 202, response.text
    return dict(response.json())


def wait_for_states(
    stack: LocalStack,
    work_item_ids: Collection[str],
    states: Collection[str] = ("completed",),
    timeout: float = 120.0,
) -> dict[str, dict[str, Any]]:
    """Poll the status API until every work item is in one of ``states``; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    views: dict[str, dict[str, Any]] = {}
    last_seen: dict[str, str] = {}
    pending = set(work_item_ids)
    with requests.Session() as session:
        session.headers.update(auth(stack))
        while pending and time.monotonic() < deadline:
            for work_item_id in sorted(pending):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    response = session.get(
                        f"{stack.api_url}/work-items/{work_item_id}", timeout=min(30.0, remaining)
                    )
                except requests.RequestException as exc:  # a host too busy to answer: keep polling
                    last_seen[work_item_id] = f"no answer ({type(exc).__name__})"
                    continue
                ok = response.status_code == 200
                state = response.json()["state"] if ok else f"http {response.status_code}"
                last_seen[work_item_id] = state
                if state in states:
                    views[work_item_id] = response.json()
                    pending.discard(work_item_id)
            if pending:
                time.sleep(0.5)
    seen = Counter(last_seen.get(work_item_id, "not polled") for work_item_id in pending)
    assert not pending, (
        f"{len(pending)} of {len(work_item_ids)} work item(s) not in {sorted(states)} after {timeout:.0f} s; "
        f"their last states: {dict(seen)}"
    )
    return views


def wait_until(condition: Callable[[], bool], failure: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` every half second; fail with ``failure`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{failure} within {timeout:.0f} s"
        time.sleep(0.5)


@dataclass(frozen=True)
class ResultEvent:
    subscription: str
    work_item_id: str
    version: int
    sequence_number: int
    properties: dict[str, Any]
    message_id: str = ""


def result_events(bus: ServiceBusClient, work_item_ids: Collection[str]) -> list[ResultEvent]:
    """Every result event for these work items on every subscription (peeked, so nothing is consumed)."""
    wanted = set(work_item_ids)
    events = []
    for subscription in SUBSCRIPTIONS:
        with bus.get_subscription_receiver("results", subscription) as receiver:
            for message in _peek_all(receiver):
                summary = json.loads(b"".join(message.body))["summary"]
                if summary["work_item_id"] in wanted:
                    properties = {
                        _text(key): _text(value)
                        for key, value in (message.application_properties or {}).items()
                    }
                    events.append(
                        ResultEvent(
                            subscription,
                            summary["work_item_id"],
                            summary["version"],
                            message.sequence_number or 0,
                            properties,
                            str(message.message_id),
                        )
                    )
    return events


def dead_letters(bus: ServiceBusClient) -> list[ServiceBusReceivedMessage]:
    with bus.get_queue_receiver("documents", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
        return list(_peek_all(receiver))


def _peek_all(receiver: Any) -> Iterable[ServiceBusReceivedMessage]:
    next_sequence = 0
    while True:
        batch = receiver.peek_messages(max_message_count=250, sequence_number=next_sequence)
        if not batch:
            return
        yield from batch
        next_sequence = max(message.sequence_number for message in batch) + 1


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
