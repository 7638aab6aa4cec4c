"""Schemathesis against the running local stack, reading the OpenAPI document the app serves.

Bounded and repeatable: a fixed number of examples per operation, derandomized (the same inputs every
run), no example database. Every call carries a token of local-producer (granted acme, globex and
initech; other generated tenants are a documented 403, so half of the well-formed ones are swapped for
a granted one). Every response must be no 5xx and conform to the document: status code, content type,
headers and body schema; a negative example must also be refused with a 4xx. The stateful part
follows the document's link from a 202 intake to the status of that very work item (submit → status
at the receipt's version).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from claimcheck.envelope import IDENTIFIER
from claimcheck.http_api import BadRequest, parse_if_match
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from local.functions_host import DEFAULT_APP
from local.identity import identity_named
from local.stack import LocalStack

OPENAPI_DOCUMENT = DEFAULT_APP.with_name("openapi.json")
FUZZ_IDENTITY = "local-producer"  # Documents.Submit and WorkItems.Read for acme, globex and initech

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = {schemathesis.GenerationMode.POSITIVE: 100, schemathesis.GenerationMode.NEGATIVE: 50}
STATEFUL_SCENARIOS = 30
STATEFUL_STEPS = 4
BOUNDED = settings(
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def test_the_app_serves_the_checked_in_document_to_an_authenticated_caller(stack: LocalStack) -> None:
    """GET /api/openapi.json is the file in the repository (Schemathesis skips the operation serving the
    document it reads, so this checks it directly); without a token it is a 401 like every route."""
    assert requests.get(f"{stack.api_url}/openapi.json", timeout=60).status_code == 401
    response = requests.get(f"{stack.api_url}/openapi.json", headers=stack.auth_headers(), timeout=60)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == json.loads(OPENAPI_DOCUMENT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def api_schema(stack: LocalStack) -> Any:
    """The document as the app serves it, aimed at the stack's API."""
    headers = stack.auth_headers(FUZZ_IDENTITY)
    schema = schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json", headers=headers, timeout=60)
    schema.config.update(base_url=stack.api_url, headers=headers)
    schema.hooks.register_hook_with_name(_granted_tenant_in_headers, "flatmap_headers")
    schema.hooks.register_hook_with_name(_granted_tenant_in_body, "flatmap_body")
    # The operator routes answer this identity (no Operations.Manage) only the gate's one documented 403,
    # already proven per route elsewhere: fuzzing them would spend hundreds of requests on that answer.
    return schema.exclude(operation_id=["listDeadLetters", "replayDeadLetter"])


# Generated tenants are almost never the caller's, and every one of those is the same documented 403.
# So a well-formed tenant is, half the time, swapped for one of the caller's own: the fuzzer then also
# reaches acceptance, storage and the status reads behind it. A malformed one stays, so a negative case
# keeps exactly what made it negative.
GRANTED_TENANTS = identity_named(FUZZ_IDENTITY).tenants


def _granted_tenant(value: object) -> st.SearchStrategy[object]:
    if isinstance(value, str) and IDENTIFIER.fullmatch(value):
        return st.sampled_from([value, *GRANTED_TENANTS])
    return st.just(value)


def _granted_tenant_in_headers(context: Any, headers: Any) -> st.SearchStrategy[Any]:
    if not isinstance(headers, dict):
        return st.just(headers)
    generated = _number_of(headers)
    headers = _fresh_intake_controls(headers)
    reading = context.operation is not None and context.operation.method.upper() == "GET"
    if reading and "X-Tenant-Id" in headers and generated % 2:
        # A status read narrowed to another tenant is a 404 like an unknown id: half the reads are not
        # narrowed, so the stateful read after a 202 can reach that very work item.
        headers = {name: value for name, value in headers.items() if name != "X-Tenant-Id"}
    if not reading and generated % 2:
        # An intake without a tenant, purpose or classification is one documented 400 each, and leaving
        # optional headers out is the generator's most common draw: half of the intakes get the absent ones
        # (a purpose and classification the caller is granted), so that enough submissions are accepted
        # for the stateful links to be followed. Present values, well-formed or not, stay as generated.
        headers = {**INTAKE_DEFAULTS, **headers}
    if "X-Tenant-Id" not in headers:
        if reading or generated % 2 == 0:
            return st.just(headers)
        return st.sampled_from(GRANTED_TENANTS).map(lambda tenant: {**headers, "X-Tenant-Id": tenant})
    return _granted_tenant(headers["X-Tenant-Id"]).map(lambda tenant: {**headers, "X-Tenant-Id": tenant})


INTAKE_DEFAULTS = {"X-Purpose": "bulk-ingest", "X-Classification": "internal"}


# Derandomized generation repeats the same few Idempotency-Keys, and a key already used for other content
# is a documented 409; a generated If-Match almost never names the current version (a documented 412).
# Both hold acceptance back, so a well-formed key gets a suffix and a well-formed If-Match is dropped on
# every other request (If-None-Match, often '*' → 304, on three of four); malformed ones stay, so a
# negative case keeps what made it negative. Which request is "every other" is a digest of the generated
# headers, not a call counter: Hypothesis replays a case and must see the same requests (and so the same
# answers), or the stateful run stops with FlakyStrategyDefinition ("depending on external state").
def _number_of(headers: dict[str, Any]) -> int:
    described = json.dumps(sorted((str(name), str(value)) for name, value in headers.items()))
    return int.from_bytes(hashlib.sha256(described.encode()).digest()[:8], "big")


# A generated X-Work-Item-Id or Idempotency-Key names what the first run of a case created: replayed, the
# same request would be a 428 (a new version needs If-Match) or a replayed receipt where it was a 202, so a
# well-formed id or key gets a fresh suffix per request and the replay creates its own work item, answered
# as the first one was. The choices above are drawn from the generated headers (before the suffixes), so a
# replay makes the same ones.
_REQUESTS = itertools.count()


def _fresh_intake_controls(headers: dict[str, Any]) -> dict[str, Any]:
    call = _number_of(headers)
    fresh = next(_REQUESTS)
    work_item = headers.get("X-Work-Item-Id")
    if isinstance(work_item, str) and IDENTIFIER.fullmatch(work_item):
        headers = {**headers, "X-Work-Item-Id": f"{work_item[:40]}-{fresh}"}
    key, if_match = headers.get("Idempotency-Key"), headers.get("If-Match")
    if isinstance(key, str) and re.fullmatch(r"[!-~]{1,200}", key):
        headers = {**headers, "Idempotency-Key": f"{key[:180]}-{fresh}"}
    if isinstance(if_match, str) and parse_if_match_or_none(if_match) is not None and call % 2:
        headers = {name: value for name, value in headers.items() if name != "If-Match"}
    if "If-None-Match" in headers and call % 4:  # '*' is a 304 for any existing work item
        headers = {name: value for name, value in headers.items() if name != "If-None-Match"}
    return headers


def parse_if_match_or_none(raw: str) -> int | None:
    try:
        return parse_if_match(raw)
    except BadRequest:
        return None


def _granted_tenant_in_body(context: Any, body: Any) -> st.SearchStrategy[Any]:
    if not isinstance(body, dict) or "tenant_id" not in body:
        return st.just(body)
    return _granted_tenant(body["tenant_id"]).map(lambda tenant: {**body, "tenant_id": tenant})


@pytest.fixture(scope="module")
def calls() -> Iterator[Counter[str]]:
    """Requests sent per operation, printed at the end of the module (the report's example count)."""
    counter: Counter[str] = Counter()
    yield counter
    print(f"\nschemathesis requests: {sum(counter.values())} {dict(sorted(counter.items()))}")


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(EXAMPLES_PER_OPERATION), ids=lambda mode: mode.value)
def test_every_operation_answers_without_5xx_and_as_documented(
    api_schema: Any, calls: Counter[str], mode: schemathesis.GenerationMode
) -> None:
    for result in api_schema.get_all_operations():
        _fuzz(result.ok(), mode, calls)


def _fuzz(operation: Any, mode: schemathesis.GenerationMode, calls: Counter[str]) -> None:
    @settings(BOUNDED, max_examples=EXAMPLES_PER_OPERATION[mode])
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        response = case.call_and_validate(checks=[*CHECKS, negative_data_rejection], timeout=60)
        calls[f"{operation.label} {response.status_code}"] += 1

    exercise()


@pytest.mark.slow
def test_submit_then_status_links_hold(api_schema: Any, calls: Counter[str]) -> None:
    """Stateful: a 202's work_item_id and receipt version feed the status read (the document's link)."""
    # The result and direct-upload routes are fuzzed per operation above; kept out of the scenarios so
    # that they stay the submit → status chains this test is about (derandomized exploration would split
    # between them, and an upload commit never succeeds without the bytes put to its grant).
    machine = (
        api_schema.exclude(operation_id="getWorkItemResult")
        .exclude(path_regex="^/uploads")
        .as_state_machine()
    )

    class CountingMachine(machine):  # type: ignore[misc,valid-type]
        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            calls[f"stateful {case.operation.label} {response.status_code}"] += 1
            case.validate_response(response, checks=CHECKS)

    CountingMachine.run(
        settings=settings(BOUNDED, max_examples=STATEFUL_SCENARIOS, stateful_step_count=STATEFUL_STEPS)
    )
    followed = sum(
        count for key, count in calls.items() if key.startswith("stateful GET /work-items/{id} 200")
    )
    assert followed > 0, "no status read followed an accepted submission"
