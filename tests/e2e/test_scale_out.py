"""End to end with the Function App scaled out (local.functions_host.instances; the session's stack runs
LOCAL_FUNCTIONS_HOST_INSTANCES host processes, 2 by default): documents posted on new connections are
taken in by both instances, both consume, and each document is completed exactly once with one result
event. Which instance did what is read from the spans each instance exports with its
``service.instance.id``."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import requests
from azure.servicebus import ServiceBusClient
from claimcheck.adapters.telemetry_setup import SPANS_FILE, telemetry_files
from claimcheck.telemetry import CONSUME_SPAN, INTAKE_SPAN, OUTCOME, WORK_ITEM_ID

from local.stack import TELEMETRY_DIR, LocalStack

from .journey import SAMPLES, auth, result_events, wait_for_states, wait_until

WAVE = 12
MAX_WAVES = 4


def _instance_spans(directory: Path, names: set[str]) -> list[tuple[str, str, dict[str, str]]]:
    """(span name, service.instance.id, attributes) of each exported span named in ``names``."""
    lines = [
        line
        for path in telemetry_files(directory, SPANS_FILE)  # one file per instance
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    found = []
    for line in lines:
        for resource_spans in json.loads(line).get("resourceSpans", []):
            resource = {
                item["key"]: item["value"].get("stringValue")
                for item in resource_spans.get("resource", {}).get("attributes", [])
            }
            for scope in resource_spans.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    if span["name"] in names:
                        attributes = {
                            item["key"]: item["value"].get("stringValue")
                            for item in span.get("attributes", [])
                        }
                        found.append((span["name"], str(resource.get("service.instance.id")), attributes))
    return found


def test_documents_spread_over_the_instances_and_each_completes_exactly_once(
    stack: LocalStack, bus: ServiceBusClient
) -> None:
    if stack.host_instances < 2:
        pytest.skip("the stack runs one host instance (LOCAL_FUNCTIONS_HOST_INSTANCES=1)")
    tenant = f"t-scale-{uuid.uuid4().hex[:8]}"
    document = (SAMPLES / "service-agreement.txt").read_bytes()
    headers = {
        **auth(stack),
        "X-Tenant-Id": tenant,
        "X-Purpose": "contract-review",
        "X-Classification": "internal",
        "Content-Type": "text/plain",
    }
    directory = stack.work_dir / TELEMETRY_DIR
    sent: list[str] = []
    intake: dict[str, set[str]] = defaultdict(set)
    consumed: dict[str, list[str]] = defaultdict(list)
    # Waves until both instances took documents in and consumed some (sessions go to whichever
    # instance's worker the broker serves first, so a small wave may land on one instance).
    for _ in range(MAX_WAVES):
        for _ in range(WAVE):
            # No session: a new connection per POST, which the kernel gives to either instance.
            response = requests.post(f"{stack.api_url}/documents", data=document, headers=headers, timeout=60)
            assert response.status_code == 202, response.text
            sent.append(response.json()["work_item_id"])
        wait_for_states(stack, sent)

        def exported() -> bool:
            intake.clear()
            consumed.clear()
            for name, instance, attributes in _instance_spans(directory, {INTAKE_SPAN, CONSUME_SPAN}):
                work_item_id = attributes.get(WORK_ITEM_ID, "")
                if work_item_id not in sent:
                    continue
                if name == INTAKE_SPAN:
                    intake[instance].add(work_item_id)
                elif attributes.get(OUTCOME) == "complete":
                    consumed[work_item_id].append(instance)
            return len(consumed) == len(sent)

        wait_until(exported, "the consume spans of every document were not exported")
        if len(intake) >= 2 and len({instance for each in consumed.values() for instance in each}) >= 2:
            break
    instances = {f"local-instance-{index}" for index in range(stack.host_instances)}
    assert set(intake) <= instances, dict(intake)
    assert len(intake) >= 2, dict(intake)
    by_instance = Counter(instance for each in consumed.values() for instance in each)
    assert set(by_instance) <= instances, by_instance
    assert len(by_instance) >= 2, by_instance
    assert {work_item_id: len(each) for work_item_id, each in consumed.items()} == dict.fromkeys(sent, 1)
    audit = Counter(event.work_item_id for event in result_events(bus, sent) if event.subscription == "audit")
    assert audit == Counter(sent)
