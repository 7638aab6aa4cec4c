"""`send` and `show` against a stub HTTP API: arguments, headers and output formatting."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobSasPermissions, ContainerClient, generate_blob_sas
from claimcheck.auth import TokenRules, authenticate
from claimcheck.client import DIRECT_UPLOAD_THRESHOLD
from typer.testing import Result

from local.azurite import ACCOUNT_KEY, ACCOUNT_NAME, Azurite
from local.identity import TokenMinter, identity_named
from local.ports import free_port
from scripts.ops_api import (
    CLASSIFICATION_HEADER,
    FUNCTION_KEY_HEADER,
    PRIORITY_HEADER,
    PURPOSE_HEADER,
    TENANT_HEADER,
    WORK_ITEM_HEADER,
)
from tests.integration.ops.api_stub import ApiStub, running_api_stub
from tests.integration.ops.cli import run_ops

RECEIPT = {
    "work_item_id": "wi-42",
    "status_url": "/api/work-items/wi-42",
    "receipt": {"object_id": "obj-1", "version": 1, "request_id": "req-9"},
}


@pytest.fixture
def api() -> Iterator[ApiStub]:
    with running_api_stub() as stub:
        yield stub


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    path = tmp_path / "contract.txt"
    path.write_bytes(b"The Supplier shall deliver the goods by 2026-01-31.\n")
    return path


def test_send_posts_the_file_with_metadata_headers_and_prints_receipt(api: ApiStub, contract: Path) -> None:
    """send streams the file body to POST /documents with the intake metadata in headers."""
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    result = run_ops(
        "send", str(contract), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal", "--priority", "high", "--work-item-id", "wi-42",
        "--api", api.base_url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (request,) = api.requests
    assert request.body == contract.read_bytes()
    assert request.headers["content-type"] == "text/plain"
    assert request.headers[TENANT_HEADER.lower()] == "acme"
    assert request.headers[PURPOSE_HEADER.lower()] == "contract-review"
    assert request.headers[CLASSIFICATION_HEADER.lower()] == "internal"
    assert request.headers[PRIORITY_HEADER.lower()] == "high"
    assert request.headers[WORK_ITEM_HEADER.lower()] == "wi-42"
    assert FUNCTION_KEY_HEADER.lower() not in request.headers
    assert "wi-42" in result.stdout
    assert "receipt.version" in result.stdout


def test_send_json_prints_the_receipt_unchanged(api: ApiStub, contract: Path) -> None:
    """send --json prints exactly the API's receipt, and --content-type overrides the guess."""
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    result = run_ops(
        "send", str(contract), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal", "--content-type", "application/pdf", "--json",
        env={"CLAIMCHECK_API": api.base_url},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == RECEIPT
    assert api.requests[0].headers["content-type"] == "application/pdf"


def test_send_reports_the_api_rejection_in_one_line(api: ApiStub, contract: Path) -> None:
    """A 4xx answer becomes one error line with the API's code, and exit code 1."""
    api.answers[("POST", "/api/documents")] = (
        413,
        {"error": "payload_too_large", "message": "document exceeds 2048 bytes"},  # the API's shape
    )
    result = run_ops(
        "send", str(contract), "--tenant", "acme", "--purpose", "p", "--classification", "internal",
        "--api", api.base_url,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: document contract.txt: API answered 413 payload_too_large: document exceeds 2048 bytes"
    )
    assert "Traceback" not in result.output


def test_send_of_a_missing_file_fails_without_calling_the_api(api: ApiStub, tmp_path: Path) -> None:
    """A file that does not exist is named in the error and nothing is posted."""
    result = run_ops(
        "send", str(tmp_path / "absent.pdf"), "--tenant", "acme", "--purpose", "p",
        "--classification", "internal", "--api", api.base_url,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "absent.pdf" in result.stderr
    assert api.requests == []


def test_show_asks_for_the_minimum_version_and_prints_a_table(api: ApiStub) -> None:
    """show --min-version adds ?min_version=N, sends the function key, prints nested fields as rows."""
    view = {"work_item_id": "wi-42", "state": "completed", "payload": {"state": "processed", "version": 2}}
    api.answers[("GET", "/api/work-items/wi-42?min_version=2")] = (200, view)
    result = run_ops(
        "show", "wi-42", "--min-version", "2", "--api", api.base_url, env={"CLAIMCHECK_API_KEY": "key-123"}
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert api.requests[0].headers[FUNCTION_KEY_HEADER.lower()] == "key-123"
    assert "key-123" not in result.output
    assert "payload.state" in result.stdout
    assert "processed" in result.stdout
    assert "completed" in result.stdout


def test_show_of_an_unknown_work_item_exits_1_with_a_clear_message(api: ApiStub) -> None:
    """A 404 from the status API is a one-line error naming the work item."""
    result = run_ops("show", "wi-missing", "--api", api.base_url)
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: work item wi-missing: API answered 404 not_found"


def test_an_unreachable_api_is_a_one_line_error() -> None:
    """Connection refused names the URL and does not print a traceback."""
    result = run_ops("show", "wi-1", "--api", f"http://127.0.0.1:{free_port()}/api")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot reach the API at http://127.0.0.1:")
    assert "Traceback" not in result.output


def test_a_malformed_api_url_is_rejected() -> None:
    """--api must be an http(s) URL; anything else is refused before any request."""
    result = run_ops("show", "wi-1", "--api", "file:///etc/passwd")
    assert result.exit_code == 1
    assert "--api must be an http(s) URL" in result.stderr


def test_send_and_show_carry_a_local_issuer_token_that_is_never_printed(
    api: ApiStub, contract: Path, token_minter: TokenMinter
) -> None:
    """Locally the token comes from the issuer's client-credentials endpoint, for local-operator."""
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    api.answers[("GET", "/api/work-items/wi-42")] = (200, {"work_item_id": "wi-42", "state": "completed"})
    sent = run_ops(
        "send", str(contract), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal", "--api", api.base_url,
    )  # fmt: skip
    shown = run_ops("show", "wi-42", "--api", api.base_url, "--json")
    assert (sent.exit_code, shown.exit_code) == (0, 0), sent.output + shown.output
    rules = TokenRules(token_minter.issuer, (token_minter.audience,), "unused")
    keys = {token_minter.key.kid: token_minter.key.private_key.public_key()}
    for request, result in zip(api.requests, (sent, shown), strict=True):
        scheme, token = request.headers["authorization"].split(" ")
        assert scheme == "Bearer"
        caller = authenticate(f"Bearer {token}", rules, SimpleNamespace(key_for=keys.get))
        assert caller.object_id == identity_named("local-operator").object_id
        assert token not in result.output
        assert token.split(".")[2] not in result.output


def test_on_azure_the_token_comes_from_default_azure_credential_for_the_audience(
    api: ApiStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --audience and no local issuer, DefaultAzureCredential is asked for <audience>/.default."""
    scopes: list[str] = []

    class Credential:
        def __enter__(self) -> Credential:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def get_token(self, scope: str) -> SimpleNamespace:
            scopes.append(scope)
            return SimpleNamespace(token="entra-token-value")

    import azure.identity

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", Credential)
    monkeypatch.delenv("CLAIMCHECK_TOKEN_ISSUER")
    api.answers[("GET", "/api/work-items/wi-42")] = (200, {"work_item_id": "wi-42"})
    remote = api.base_url.replace("127.0.0.1", "127.0.0.2")  # not the local stack: the Azure path
    result = run_ops("show", "wi-42", "--api", remote, "--audience", "api://claimcheck-dev")
    assert scopes == ["api://claimcheck-dev/.default"], result.output
    assert "entra-token-value" not in result.output


def test_without_any_token_source_a_remote_api_is_refused_in_one_line() -> None:
    remote = "https://claimcheck.example.net/api"
    result = run_ops("show", "wi-1", "--api", remote, env={"CLAIMCHECK_TOKEN_ISSUER": ""})
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no token source: give --audience")


def test_a_function_key_a_header_cannot_carry_is_named_not_blamed_on_the_api(api: ApiStub) -> None:
    """Found in review: a key with a line end (read from a file) made urllib refuse the header with a
    ValueError, which show reported as "the API answered something that is not JSON" though nothing
    was sent. The key is named (never printed) and no request is made."""
    api.answers[("GET", "/api/work-items/wi-42")] = (200, {"work_item_id": "wi-42"})
    result = run_ops("show", "wi-42", "--api", api.base_url, env={"CLAIMCHECK_API_KEY": "key-123\r\n"})
    assert result.exit_code == 1
    assert "function key" in result.stderr
    assert "not JSON" not in result.stderr
    assert "key-123" not in result.output
    assert api.requests == []


def _send(api: ApiStub, path: Path, *extra: str, env: dict[str, str] | None = None) -> Result:
    return run_ops(
        "send", str(path), "--tenant", "acme", "--purpose", "contract-review",
        "--classification", "internal", "--api", api.base_url, *extra, env=env,
    )  # fmt: skip


def test_send_if_match_sends_the_version_it_replaces(api: ApiStub, contract: Path) -> None:
    """--if-match goes out as If-Match (a new version of an existing work item needs it: 428 without)."""
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    result = _send(api, contract, "--work-item-id", "wi-42", "--if-match", "1")
    assert result.exit_code == 0, result.output
    (request,) = api.requests
    assert request.headers["if-match"] == "1"
    assert request.headers["idempotency-key"]


def test_send_new_version_reads_the_current_version_first(api: ApiStub, contract: Path) -> None:
    """--new-version asks GET /work-items/{id} for the current version, then sends it as If-Match."""
    api.answers[("GET", "/api/work-items/wi-42")] = (200, {"work_item_id": "wi-42", "version": 3})
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    result = _send(api, contract, "--work-item-id", "wi-42", "--new-version")
    assert result.exit_code == 0, result.output
    read, write = api.requests
    assert (read.method, read.path) == ("GET", "/api/work-items/wi-42")
    assert write.headers["if-match"] == "3"


def test_send_new_version_of_an_unknown_work_item_sends_its_first(api: ApiStub, contract: Path) -> None:
    api.answers[("POST", "/api/documents")] = (202, RECEIPT)
    result = _send(api, contract, "--work-item-id", "wi-42", "--new-version")
    assert result.exit_code == 0, result.output
    assert "if-match" not in api.requests[-1].headers


def test_send_names_a_missing_if_match_as_the_api_does(api: ApiStub, contract: Path) -> None:
    """The API's 428 comes back in one line with its code and message."""
    answer = {"error": "precondition_required", "message": "work item exists at version 1; send If-Match"}
    api.answers[("POST", "/api/documents")] = (428, answer)
    result = _send(api, contract, "--work-item-id", "wi-42")
    assert result.exit_code == 1
    assert "428 precondition_required: work item exists at version 1" in result.stderr
    assert "Traceback" not in result.output


def test_a_file_over_the_maximum_is_refused_from_its_size_alone(api: ApiStub, tmp_path: Path) -> None:
    """3 GiB (sparse: nothing is read or written) over the API's 2 GiB maximum: payload_too_large
    before any request, where the old CLI read and posted it to meet use_direct_upload."""
    huge = tmp_path / "huge.bin"
    with huge.open("wb") as file:
        file.truncate(3 * 1024**3)
    result = _send(api, huge)
    assert result.exit_code == 1
    assert "payload_too_large" in result.stderr
    assert "nothing was sent" in result.stderr
    assert api.requests == []


def test_a_directory_fails_as_a_missing_file_does(api: ApiStub, tmp_path: Path) -> None:
    missing, directory = _send(api, tmp_path / "absent.pdf"), _send(api, tmp_path)
    assert missing.exit_code == directory.exit_code == 1
    assert "Is a directory" in directory.stderr
    assert api.requests == []


def test_a_large_file_goes_through_the_direct_upload(api: ApiStub, tmp_path: Path, azurite: Azurite) -> None:
    """Over the inline cap, send does what ClaimCheckClient.submit does: the grant (POST /uploads),
    the bytes to the granted blob (real Azurite, a write-only SAS), the commit with their sha256."""
    container = ContainerClient.from_connection_string(azurite.connection_string, "staging-test")
    with contextlib.suppress(ResourceExistsError):
        container.create_container()
    sas = generate_blob_sas(
        ACCOUNT_NAME, "staging-test", "upload-1", account_key=ACCOUNT_KEY,
        permission=BlobSasPermissions(create=True, write=True), expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    grant = {
        "upload_id": "upload-1",
        "upload_url": f"{azurite.blob_endpoint}/staging-test/upload-1?{sas}",
        "block_bytes": 4 * 1024 * 1024,
    }
    large = tmp_path / "large.bin"
    large.write_bytes(os.urandom(DIRECT_UPLOAD_THRESHOLD + 1024))
    api.answers[("POST", "/api/uploads")] = (201, grant)
    api.answers[("POST", "/api/uploads/upload-1/commit")] = (202, RECEIPT)
    result = _send(api, large, "--priority", "high")
    assert result.exit_code == 0, result.output
    granted, committed = api.requests
    assert (granted.path, granted.headers["x-upload-length"]) == ("/api/uploads", str(large.stat().st_size))
    assert committed.headers["x-upload-sha256"] == hashlib.sha256(large.read_bytes()).hexdigest()
    assert committed.headers[PRIORITY_HEADER.lower()] == "high"
    assert container.download_blob("upload-1").readall() == large.read_bytes()


def test_send_to_an_unreachable_api_says_it_tries_again_then_fails_in_one_line(contract: Path) -> None:
    """The client's retries (the same idempotency key) are announced, never a silent wait; then one
    `error:` line naming the API."""
    result = run_ops(
        "send", str(contract), "--tenant", "acme", "--purpose", "p", "--classification", "internal",
        "--api", f"http://127.0.0.1:{free_port()}/api",
    )  # fmt: skip
    assert result.exit_code == 1
    *retries, error = result.stderr.strip().splitlines()
    assert retries
    assert all(re.fullmatch(r"no answer or busy; trying again in \d+\.\d s", line) for line in retries)
    assert error.startswith("error: document contract.txt: cannot reach the API at http://127.0.0.1:")
