"""functions/openapi.json and the Function App agree: the same routes and methods, and every status and
error code the handlers (and the host in front of them) can answer is documented for that operation."""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from claimcheck.auth import MISSING_ROLE_BODY, UNAUTHENTICATED_BODY
from claimcheck.errors import IntakeRejected
from claimcheck.http_api import DOCUMENT_PART, FORM_FIELDS, HEADER_FIELDS, INTAKE_CONTROL_HEADERS, Unavailable
from claimcheck.policy import DEFAULT_PURPOSES, Classification

from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import HttpFunction, load_function_app
from local.functions_host.host_config import read_host_json

DOCUMENT_PATH = DEFAULT_APP.with_name("openapi.json")
DOCUMENT: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text(encoding="utf-8"))

# What the host answers itself in front of any function: oversize headers, saturation, a raising function.
# ``_json(<status>, {"error": "<code>"`` as the handlers and the gate write their literal answers.
LITERAL_ANSWER = re.compile(r'_json\(\s*(\d{3}),\s*\{"error":\s*"(\w+)"')
HOST_ANSWERS = {431: {"request_header_fields_too_large"}, 500: {"internal_error"}, 503: {"service_busy"}}


def _leaves(cls: type[IntakeRejected]) -> Iterator[type[IntakeRejected]]:
    yield cls
    for subclass in cls.__subclasses__():
        yield from _leaves(subclass)


def _http_functions() -> list[HttpFunction]:
    return load_function_app(DEFAULT_APP).of_type(HttpFunction)


def _operation(function: HttpFunction, method: str) -> dict[str, Any]:
    operation: dict[str, Any] = DOCUMENT["paths"][f"/{function.route}"][method.lower()]
    return operation


def _documented_codes(operation: dict[str, Any], status: int) -> set[str]:
    response = operation["responses"].get(str(status))
    assert response is not None, f"{operation['operationId']}: status {status} is not documented"
    examples = response.get("content", {}).get("application/json", {}).get("examples", {})
    return {example["value"]["error"] for example in examples.values()}


def test_the_document_is_valid_openapi_3_1() -> None:
    """Schemathesis validates it against the OpenAPI 3.1 meta-schema (and it is what the fuzzer reads)."""
    assert DOCUMENT["openapi"].startswith("3.1")
    schemathesis.openapi.from_dict(DOCUMENT).validate()


def test_server_url_is_the_route_prefix() -> None:
    assert (
        DOCUMENT["servers"][0]["url"] == "/" + read_host_json(DEFAULT_APP.with_name("host.json")).route_prefix
    )


def test_every_route_of_the_app_is_documented_and_nothing_else() -> None:
    """Same (path, method) pairs in function_app.py and the document, in both directions."""
    registered = {
        (f"/{function.route}", method.lower())
        for function in _http_functions()
        for method in function.methods or ()
    }
    documented = {(path, method) for path, item in DOCUMENT["paths"].items() for method in item}
    assert registered == documented


def test_path_parameters_match_the_route_templates() -> None:
    for function in _http_functions():
        for method in function.methods or ():
            declared = {
                p["name"] for p in _operation(function, method).get("parameters", []) if p["in"] == "path"
            }
            assert declared == set(re.findall(r"\{(\w+)", function.route)), function.route


def test_every_literal_status_a_handler_returns_is_documented_with_its_code() -> None:
    """Each ``_json(<status>, {"error": <code>...})`` in a handler is a documented (status, code) pair."""
    answers = re.compile(r'_json\(\s*(\d{3}),\s*\{"error":\s*(?:"(\w+)"|(\w+)\.code)')
    for function in _http_functions():
        source = inspect.getsource(function.handler)
        for method in function.methods or ():
            operation = _operation(function, method)
            for status, code, variable in answers.findall(source):
                codes = _documented_codes(operation, int(status))
                if code:
                    assert code in codes, f"{function.route}: {status} {code} is not documented"
                elif variable == "bad":
                    assert {"bad_request", "invalid_request"} & codes, f"{function.route}: 400 codes"
            for match in re.finditer(r"_json\(\s*(\d{3})", source):
                assert match.group(1) in operation["responses"], f"{function.route}: {match.group(1)}"


def test_every_handler_answering_an_outage_documents_it_with_retry_after() -> None:
    """A handler that answers a storage outage through ``Unavailable`` (intake, grant, commit) documents
    503 ``unavailable`` with that very message and the Retry-After header."""
    from claimcheck.errors import StorageUnavailable

    body = Unavailable.answer("contract", StorageUnavailable("x"), logging.getLogger("test.openapi"))
    assert body is not None
    outage_routes = set()
    for function in _http_functions():
        if "Unavailable.answer(" not in inspect.getsource(function.handler):
            continue
        outage_routes.add(function.route)
        for method in function.methods or ():
            response = _operation(function, method)["responses"]["503"]
            examples = response["content"]["application/json"]["examples"].values()
            assert body in [example["value"] for example in examples], function.route
            assert "Retry-After" in response["headers"], function.route
    assert outage_routes == {"documents", "uploads", "uploads/{upload_id}/commit"}


def test_every_intake_refusal_is_documented_under_its_status() -> None:
    """Every IntakeRejected leaf (the producer's closed set of refusals) appears with its status and code."""
    operation = DOCUMENT["paths"]["/documents"]["post"]
    for leaf in _leaves(IntakeRejected):
        assert leaf.code in _documented_codes(operation, leaf.http_status), f"{leaf.__name__}"


@pytest.mark.parametrize(("status", "codes"), sorted(HOST_ANSWERS.items()))
def test_the_hosts_own_answers_are_documented_on_every_operation(status: int, codes: set[str]) -> None:
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            assert codes <= _documented_codes(operation, status), f"{method} {path}: {status}"


def test_every_documented_error_uses_the_error_shape() -> None:
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, f"{method} {path} {status}"


def test_enumerations_are_the_apps_own() -> None:
    """Purposes and classifications listed in the document are exactly those intake accepts."""
    operation = DOCUMENT["paths"]["/documents"]["post"]
    headers = {parameter["name"]: parameter["schema"] for parameter in operation["parameters"]}
    form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]
    for schema in (headers["X-Purpose"], form["purpose"]):
        assert schema["enum"] == sorted(DEFAULT_PURPOSES)
    for schema in (headers["X-Classification"], form["classification"]):
        assert schema["enum"] == [level.value for level in Classification]


def test_form_fields_and_headers_are_the_ones_intake_reads() -> None:
    operation = DOCUMENT["paths"]["/documents"]["post"]
    headers = {
        parameter["name"].lower() for parameter in operation["parameters"] if parameter["in"] == "header"
    }
    form = set(operation["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"])
    assert headers == set(HEADER_FIELDS) | set(INTAKE_CONTROL_HEADERS)
    assert form == {DOCUMENT_PART, *FORM_FIELDS}


def test_every_gated_route_documents_the_gates_answers() -> None:
    """A handler that calls ``_gate`` can answer whatever ``_gate`` answers (401 with its challenge,
    403, 503); the document says so for that operation, and declares the bearer scheme for it."""
    import function_app

    gate = inspect.getsource(function_app._gate)
    gate_answers = {
        (401, UNAUTHENTICATED_BODY["error"]),
        (403, MISSING_ROLE_BODY["error"]),
        *((int(status), code) for status, code in LITERAL_ANSWER.findall(gate)),
    }
    assert {status for status, _ in gate_answers} == {401, 403, 503}
    schemes = DOCUMENT["components"]["securitySchemes"]
    for function in _http_functions():
        assert "_gate(" in inspect.getsource(function.handler), f"{function.route} is not gated"
        for method in function.methods or ():
            operation = _operation(function, method)
            security = operation.get("security", DOCUMENT["security"])
            assert security, f"{function.route} declares no security"
            assert all(schemes[name]["scheme"] == "bearer" for entry in security for name in entry)
            for status, code in gate_answers:
                assert code in _documented_codes(operation, status), f"{function.route}: {status} {code}"
            assert "WWW-Authenticate" in operation["responses"]["401"]["headers"]


@pytest.mark.parametrize(
    ("route", "method", "headers"),
    [
        ("work-items/{id}", "get", {"x-tenant-id", "if-none-match"}),
        ("work-items/{id}/result", "get", {"x-tenant-id"}),
        ("dead-letters", "get", {"x-tenant-id"}),
        ("dead-letters/{sequence_number}/replay", "post", {"x-tenant-id"}),
    ],
)
def test_reads_use_the_headers_they_document(route: str, method: str, headers: set[str]) -> None:
    """The tenant-scoped reads take X-Tenant-Id (narrowing to one granted tenant, the one rule
    AccessTable.read_scope) and the status route If-None-Match; each documents what it reads."""
    [function] = [function for function in _http_functions() if function.route == route]
    source = inspect.getsource(function.handler)
    read = {name.lower() for name in re.findall(r'headers\.get\("([\w-]+)"\)', source)}
    documented = {
        parameter["name"].lower()
        for parameter in DOCUMENT["paths"][f"/{route}"][method]["parameters"]
        if parameter["in"] == "header"
    }
    assert read == documented == headers
