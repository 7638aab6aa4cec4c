"""claimcheck-mcp's pure logic: the idempotency key a model's retry reuses, what submit_document may read,
refusals with a remedy for every code the API documents, and the token cache. The whole server against
the real stack: tests/e2e/test_mcp.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, cast

import pytest
from claimcheck.client import ApiError, ClaimCheckClient, Receipt

from scripts.mcp_server import CachedToken, claims_of
from scripts.mcp_tools import REMEDIES, AgentTools, ToolRefusal

OPENAPI = Path(__file__).resolve().parents[2] / "functions" / "openapi.json"
# Codes the tool turns into "unavailable" because the client already retried them with the same key.
RETRIED_CODES = {"publish_not_confirmed", "request_in_progress", "service_busy"}


class RecordingClient:
    """Stands in for ClaimCheckClient.submit: records the key and answers a receipt or a refusal."""

    def __init__(self, refusal: ApiError | None = None) -> None:
        self.keys: list[str] = []
        self.sources: list[Any] = []
        self.refusal = refusal

    def submit(self, source: Any, **fields: Any) -> Receipt:
        self.keys.append(fields["idempotency_key"])
        self.sources.append(source)
        if self.refusal is not None:
            raise self.refusal
        return Receipt("wi-1", 1, fields["idempotency_key"], replayed=False, raw={"receipt": {"version": 1}})


def _tools(client: RecordingClient, root: Path) -> AgentTools:
    return AgentTools(cast(ClaimCheckClient, client), roots=[root])


def _submit(tools: AgentTools, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "tenant_id": "acme",
        "purpose": "contract-review",
        "classification": "internal",
        "content_type": "text/plain",
        "content_base64": base64.b64encode(b"The Supplier shall deliver.").decode(),
    }
    return tools.submit_document(**(arguments | overrides))


def test_the_same_arguments_give_the_same_key_and_other_content_another(tmp_path: Path) -> None:
    client = RecordingClient()
    tools = _tools(client, tmp_path)
    _submit(tools)
    _submit(tools)
    _submit(tools, content_base64=base64.b64encode(b"The Buyer shall pay.").decode())
    _submit(tools, tenant_id="globex")
    document = tmp_path / "same.txt"
    document.write_bytes(b"The Supplier shall deliver.")
    _submit(tools, content_base64=None, path=str(document))
    first, retry, other_content, other_tenant, by_path = client.keys
    assert first == retry
    assert len({first, other_content, other_tenant}) == 3
    assert by_path == first  # the same bytes by path or inline: the same submission
    assert client.sources[-1] == document.resolve()  # a path is streamed by the client, not read here


def test_submit_reads_only_inside_its_roots_and_one_source(tmp_path: Path) -> None:
    client = RecordingClient()
    tools = _tools(client, tmp_path / "allowed")
    (tmp_path / "allowed").mkdir()
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not for the agent")
    cases: list[dict[str, Any]] = [
        {"content_base64": None, "path": str(secret)},
        {"content_base64": None, "path": str(tmp_path / "allowed" / ".." / "elsewhere.txt")},
        {"content_base64": None, "path": str(tmp_path / "allowed" / "missing.txt")},
        {"content_base64": None},
        {"path": str(secret)},
        {"content_base64": "not base64!"},
    ]
    for overrides in cases:
        with pytest.raises(ToolRefusal) as refused:
            _submit(tools, **overrides)
        assert refused.value.code == "invalid_arguments", overrides
        assert "not for the agent" not in refused.value.text()
    assert client.keys == []  # nothing reached the API


def test_an_api_refusal_carries_its_code_status_and_a_remedy(tmp_path: Path) -> None:
    refusal = ApiError(
        412, {"error": "conflict_detected", "message": "version 2 is current", "current_version": 2}
    )
    with pytest.raises(ToolRefusal) as refused:
        _submit(_tools(RecordingClient(refusal), tmp_path))
    carried = json.loads(refused.value.text())
    assert carried == {
        "error": "conflict_detected",
        "http_status": 412,
        "message": "version 2 is current",
        "current_version": 2,
        "remedy": REMEDIES["conflict_detected"],
    }


def test_every_error_code_of_the_api_has_a_remedy() -> None:
    """A new error code in functions/openapi.json needs a line telling a model what to do about it."""
    codes: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for example in (
                (node.get("examples") or {}).values() if isinstance(node.get("examples"), dict) else ()
            ):
                value = example.get("value") if isinstance(example, dict) else None
                if isinstance(value, dict) and "error" in value:
                    codes.add(str(value["error"]))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(json.loads(OPENAPI.read_text(encoding="utf-8")))
    assert "unknown_version" in codes  # the walk does find the documented codes
    assert sorted(codes - RETRIED_CODES - set(REMEDIES)) == []
    for code in RETRIED_CODES:
        assert ToolRefusal.from_answer(503, {"error": code, "message": "m"}).code == "unavailable"
    assert ToolRefusal.from_answer(503, {"error": "no_answer", "message": "URLError"}).code == "unavailable"


def _token(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{payload}.signature"


def test_the_token_is_fetched_again_only_near_its_expiry() -> None:
    now = [1_000.0]
    fetched: list[str] = []

    def fetch() -> str:
        token = _token({"exp": now[0] + 3600, "roles": ["Documents.Submit", "Operations.Manage"]})
        fetched.append(token)
        return token

    token = CachedToken(fetch, clock=lambda: now[0])
    assert token() == token() == fetched[0]
    now[0] += 3600 - 299  # inside the refresh margin: a new one
    assert token() == fetched[1]
    assert token.roles() == {"Documents.Submit", "Operations.Manage"}
    assert claims_of("not a token") == {}
    token.refresh()  # refused by the API long before its expiry: a new one at once, then cached
    assert token() == token() == fetched[2]
    assert len(fetched) == 3


class DeadLetterClient:
    """Stands in for ClaimCheckClient's dead-letter calls: records the tenant each one stated."""

    def __init__(self) -> None:
        self.tenants: list[str | None] = []

    def dead_letters(self, limit: int | None = None, *, tenant_id: str | None = None) -> tuple[int, Any]:
        self.tenants.append(tenant_id)
        return 200, {"queue": "documents", "messages": []}

    def replay_dead_letter(self, sequence_number: int, *, tenant_id: str | None = None) -> tuple[int, Any]:
        self.tenants.append(tenant_id)
        return 404, {"error": "not_found", "message": f"no dead-lettered message {sequence_number}"}


def test_operator_tools_pass_the_selected_tenant_to_the_api(tmp_path: Path) -> None:
    client = DeadLetterClient()
    tools = AgentTools(cast(ClaimCheckClient, client), roots=[tmp_path])

    assert tools.list_dead_letters(limit=5, tenant_id="acme") == {"queue": "documents", "messages": []}
    assert tools.list_dead_letters(limit=5)["messages"] == []
    with pytest.raises(ToolRefusal) as missing:
        tools.replay_dead_letter(sequence_number=3, tenant_id="globex")

    assert missing.value.code == "dead_letter_not_found"
    assert client.tenants == ["acme", None, "globex"]
