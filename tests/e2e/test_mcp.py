"""claimcheck-mcp against the local stack, driven by the MCP SDK's own client: over stdio (the server as
a subprocess, as an agent runtime launches it) and over streamable HTTP on loopback.

The server gets its token from the stack's local issuer as ``local-tests`` (tenants ``t-*``), exactly as
it would from Entra ID; a document of another tenant is written as ``local-producer``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from local.identity import SigningKey, TokenMinter, identity_named
from local.ports import free_port, wait_for_port
from local.stack import LocalStack
from scripts.mcp_server import CachedToken, build_server
from scripts.mcp_tools import AgentTools
from scripts.ops_token import TokenSource

from .journey import SAMPLES, TEST_IDENTITY
from .log_scan import SESSION_NEEDLES, forms_of, leaks

REPO = Path(__file__).resolve().parents[2]
AGENT_TOOLS = {"submit_document", "get_status", "wait_for", "get_result"}
OPERATOR_TOOLS = {"list_dead_letters", "replay_dead_letter"}
DAMAGED = SAMPLES.parent / "dead-letter" / "damaged-contract.pdf"
OPERATOR = "local-operator"
PDF = SAMPLES / "supply-agreement.pdf"
WAIT_SECONDS = 240


def _server_args(stack: LocalStack, *extra: str, identity: str = TEST_IDENTITY) -> list[str]:
    return [
        "-m",
        "scripts.mcp_server",
        "--api",
        stack.api_url,
        "--token-issuer",
        stack.minter.issuer,
        "--client-id",
        identity,
        "--root",
        str(SAMPLES.parent),
        *extra,
    ]


@asynccontextmanager
async def _stdio_client(stack: LocalStack, log: Path, identity: str = TEST_IDENTITY) -> AsyncIterator[Client]:
    with log.open("w", encoding="utf-8") as errlog:
        arguments = _server_args(stack, identity=identity)
        parameters = StdioServerParameters(command=sys.executable, args=arguments, cwd=str(REPO))
        async with Client(stdio_client(parameters, errlog=errlog)) as client:
            yield client


@pytest.fixture(scope="module")
def http_server(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``claimcheck-mcp --transport http`` on a free loopback port; its URL and its log file."""
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "mcp-http.log"
    with log.open("w", encoding="utf-8") as output:
        process = subprocess.Popen(
            [sys.executable, *_server_args(stack, "--transport", "http", "--port", str(port))],
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        process.terminate()
        process.wait(timeout=30)


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _error(result: CallToolResult) -> dict[str, Any]:
    """The refusal a tool error carries: the API's code, its message and the remedy."""
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    refusal: dict[str, Any] = json.loads(text[text.index("{") :])
    return refusal


async def _listed_tools(client: Client) -> dict[str, Any]:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for tool in tools.values():
        assert tool.description, tool.name
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    return tools


def _tenant() -> str:
    return f"t-mcp-{uuid.uuid4().hex[:8]}"


def test_stdio_submit_wait_result_retry_and_cross_tenant(stack: LocalStack, tmp_path: Path) -> None:
    log = tmp_path / "mcp-stdio.log"
    # Written as local-producer: the server's identity (local-tests) may not see tenant acme.
    written = requests.post(
        f"{stack.api_url}/documents",
        data=b"The Supplier shall deliver the goods.",
        headers={
            **stack.auth_headers("local-producer"),
            "X-Tenant-Id": "acme",
            "X-Purpose": "contract-review",
            "X-Classification": "internal",
            "Content-Type": "text/plain",
        },
        timeout=60,
    )
    assert written.status_code == 202, written.text
    foreign = written.json()["work_item_id"]

    async def journey() -> None:
        async with _stdio_client(stack, log) as client:
            tools = await _listed_tools(client)
            assert set(tools) == AGENT_TOOLS  # no operator tools for an identity without the role
            submit_schema = tools["submit_document"].input_schema
            assert set(submit_schema["required"]) == {
                "tenant_id",
                "purpose",
                "classification",
                "content_type",
            }
            assert submit_schema["properties"]["purpose"]["enum"] == [
                "contract-review",
                "evidence-archive",
                "bulk-ingest",
            ]
            arguments = {
                "tenant_id": _tenant(),
                "purpose": "contract-review",
                "classification": "confidential",
                "content_type": "application/pdf",
                "path": str(PDF),
            }
            first = _structured(await client.call_tool("submit_document", arguments))
            # A model retrying the same call: the same receipt, nothing written again.
            again = _structured(await client.call_tool("submit_document", arguments))
            assert (again["work_item_id"], again["version"], again["replayed"]) == (
                first["work_item_id"],
                first["version"],
                True,
            )
            assert again["receipt"] == first["receipt"]
            assert not first["replayed"]
            work_item = {"work_item_id": first["work_item_id"]}
            waited = _structured(
                await client.call_tool(
                    "wait_for", work_item | {"min_version": first["version"], "timeout_seconds": WAIT_SECONDS}
                )
            )
            assert (waited["visibility"], waited["next_action"], waited["exhausted"]) == (
                "version_confirmed",
                "proceed",
                False,
            )
            result = _structured(await client.call_tool("get_result", work_item))
            assert result["parties"] == ["Fabrikam Components GmbH", "Tailspin Toys Ltd."]
            assert [obligation["page"] for obligation in result["obligations"]] == [1, 1, 1, 2, 2, 2, 3]
            assert result["version"] == first["version"]
            assert result["page_count"] == 3
            status = _structured(await client.call_tool("get_status", work_item))
            assert (status["state"], status["version"]) == ("completed", first["version"])

            # Another tenant's work item is refused exactly like an id that does not exist.
            unknown = f"wi-{uuid.uuid4().hex}"
            refused_foreign = _error(await client.call_tool("get_status", {"work_item_id": foreign}))
            refused_unknown = _error(await client.call_tool("get_status", {"work_item_id": unknown}))
            assert refused_foreign["error"] == "not_found"
            assert json.dumps(refused_foreign).replace(foreign, "ID") == json.dumps(refused_unknown).replace(
                unknown, "ID"
            )
            refused_result = _error(await client.call_tool("get_result", {"work_item_id": foreign}))
            assert refused_result["error"] == "not_found"
            # A version never accepted: the API's code and a remedy, never an invitation to resend.
            never = _error(await client.call_tool("wait_for", work_item | {"min_version": 9}))
            assert never["error"] == "unknown_version"
            assert "stop" in never["remedy"]

    asyncio.run(journey())
    text = log.read_text(encoding="utf-8")
    assert "refused: not_found" in text  # the server does log its calls: the scan below reads them
    assert leaks({log: text}, tmp_path, list(SESSION_NEEDLES)) == []


def test_http_transport_submit_base64_wait_and_result(
    stack: LocalStack, http_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, log = http_server
    marker = f"MCP-MARKER-{uuid.uuid4().hex}"
    SESSION_NEEDLES.append(marker)
    document = (SAMPLES / "service-agreement.txt").read_bytes() + f"\n{marker}\n".encode()

    async def journey() -> None:
        async with Client(url) as client:
            assert set(await _listed_tools(client)) == AGENT_TOOLS
            arguments = {
                "tenant_id": _tenant(),
                "purpose": "contract-review",
                "classification": "internal",
                "content_type": "text/plain",
                "content_base64": base64.b64encode(document).decode(),
            }
            receipt = _structured(await client.call_tool("submit_document", arguments))
            assert _structured(await client.call_tool("submit_document", arguments))["replayed"] is True
            waited = _structured(
                await client.call_tool(
                    "wait_for",
                    {
                        "work_item_id": receipt["work_item_id"],
                        "min_version": receipt["version"],
                        "timeout_seconds": WAIT_SECONDS,
                    },
                )
            )
            assert waited["next_action"] == "proceed"
            result = _structured(
                await client.call_tool("get_result", {"work_item_id": receipt["work_item_id"]})
            )
            assert result["parties"] == ["Northwind Analytics Ltd.", "Contoso Retail Inc."]
            assert len(result["obligations"]) == 7
            assert all(marker not in obligation["text"] for obligation in result["obligations"])
            # Refusals carry the API's code and a remedy; a tenant not granted is named nowhere.
            not_pdf = _error(
                await client.call_tool("submit_document", arguments | {"content_type": "application/pdf"})
            )
            assert (not_pdf["error"], not_pdf["http_status"]) == ("forbidden_content_type", 415)
            foreign = _error(await client.call_tool("submit_document", arguments | {"tenant_id": "acme"}))
            assert (foreign["error"], foreign["http_status"]) == ("forbidden", 403)
            assert "acme" not in json.dumps(foreign)
            assert foreign["remedy"]

    asyncio.run(journey())
    text = log.read_text(encoding="utf-8")
    assert "refused: forbidden_content_type" in text
    assert leaks({log: text}, tmp_path, [*forms_of(marker), *SESSION_NEEDLES]) == []


def test_expired_token_is_a_clear_tool_error(stack: LocalStack) -> None:
    """The server's identity no longer holds a valid token: every tool says so, with a remedy."""

    def expired() -> str:
        return stack.minter.token(identity_named(TEST_IDENTITY), lifetime=-600)

    from claimcheck.client import ClaimCheckClient

    tools = AgentTools(ClaimCheckClient(stack.api_url, expired), roots=[SAMPLES])

    async def call() -> dict[str, Any]:
        async with Client(build_server(tools)) as client:
            return _error(await client.call_tool("get_status", {"work_item_id": "wi-expired"}))

    refusal = asyncio.run(call())
    assert (refusal["error"], refusal["http_status"]) == ("unauthenticated", 401)
    assert "sign-in" in refusal["remedy"]
    # The same refusal straight from the API, for comparison: the tool adds only the remedy.
    answer = requests.get(
        f"{stack.api_url}/work-items/wi-expired", headers={"Authorization": f"Bearer {expired()}"}, timeout=30
    )
    assert answer.status_code == 401
    assert answer.json()["error"] == refusal["error"]


def test_a_token_refused_before_its_expiry_is_fetched_again_and_the_call_made_once_more(
    stack: LocalStack,
) -> None:
    """A 401 in mid-lifetime (the token revoked, its signing key rotated away): the server fetches a new
    token from the local issuer and calls once more; when that one is refused too, the tool says so,
    after exactly one new token (no loop)."""
    from claimcheck.client import ClaimCheckClient

    issuer = TokenSource(issuer=stack.minter.issuer, client_id=TEST_IDENTITY)
    # Valid for an hour by its own claims, so the cache keeps it; signed with a key the API never
    # published, under the issuer's real kid: to the API, a token it no longer accepts.
    stranger = TokenMinter(SigningKey.generate(), stack.minter.base_url)
    refused = stranger.sign(stack.minter.claims(identity_named(TEST_IDENTITY)), kid=stack.minter.key.kid)
    work_item_id = f"wi-mcp-{uuid.uuid4().hex[:12]}"

    def status_through(tokens: list[str]) -> dict[str, Any]:
        """get_status as the server answers it, the tokens fetched in turn (the last one repeated)."""
        fetched: list[str] = []

        def fetch() -> str:
            token = tokens[min(len(fetched), len(tokens) - 1)]
            fetched.append(token)
            return issuer.token(stack.api_url) if token == "issuer" else token

        token = CachedToken(fetch)
        tools = AgentTools(ClaimCheckClient(stack.api_url, token), roots=[SAMPLES])

        async def call() -> dict[str, Any]:
            async with Client(build_server(tools, token=token)) as client:
                return _error(await client.call_tool("get_status", {"work_item_id": work_item_id}))

        return {"refusal": asyncio.run(call()), "fetched": len(fetched)}

    # The second token, the issuer's, gets through: the unknown id answers not_found.
    recovered = status_through([refused, "issuer"])
    assert (recovered["refusal"]["error"], recovered["refusal"]["http_status"]) == ("not_found", 404)
    assert recovered["fetched"] == 2
    # Refused again after the one new token: the 401 is the answer, and no third token is fetched.
    stuck = status_through([refused])
    assert (stuck["refusal"]["error"], stuck["refusal"]["http_status"]) == ("unauthenticated", 401)
    assert stuck["fetched"] == 2


def test_operator_tools_list_and_replay_a_dead_letter_exactly_once(stack: LocalStack, tmp_path: Path) -> None:
    """Listed only for an identity holding Operations.Manage; the route itself refuses everyone else."""
    refused = requests.get(
        f"{stack.api_url}/dead-letters", headers=stack.auth_headers(TEST_IDENTITY), timeout=30
    )
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    log = tmp_path / "mcp-operator.log"

    async def dead_letters_of(client: Client, work_item_id: str) -> list[dict[str, Any]]:
        listed = _structured(await client.call_tool("list_dead_letters", {"limit": 100}))
        return [message for message in listed["messages"] if message["work_item_id"] == work_item_id]

    async def eventually(client: Client, work_item_id: str, ready: Any) -> list[dict[str, Any]]:
        for _ in range(60):
            found = await dead_letters_of(client, work_item_id)
            if ready(found):
                return found
            await asyncio.sleep(1)
        raise AssertionError(f"dead letters of {work_item_id} never became as expected: {found}")

    async def journey() -> None:
        async with _stdio_client(stack, log, identity=OPERATOR) as client:
            assert set(await _listed_tools(client)) == AGENT_TOOLS | OPERATOR_TOOLS
            receipt = _structured(
                await client.call_tool(
                    "submit_document",
                    {
                        "tenant_id": "initech",
                        "purpose": "contract-review",
                        "classification": "internal",
                        "content_type": "application/pdf",
                        "path": str(DAMAGED),
                    },
                )
            )
            work_item = receipt["work_item_id"]
            failed = _error(
                await client.call_tool(
                    "wait_for", {"work_item_id": work_item, "min_version": 1, "timeout_seconds": WAIT_SECONDS}
                )
            )
            assert (failed["error"], failed["failure_reason"]) == (
                "needs_reconciliation",
                "processing_failed",
            )
            [dead] = await eventually(client, work_item, lambda found: len(found) == 1)
            assert (dead["reason"], dead["tenant"]) == ("processing_failed", "initech")
            sequence = {"sequence_number": dead["sequence_number"]}
            # tenant_id (X-Tenant-Id) narrows to one granted tenant: another one sees and replays nothing.
            narrowed = {"limit": 100, "tenant_id": "acme"}
            other = _structured(await client.call_tool("list_dead_letters", narrowed))
            assert work_item not in [message["work_item_id"] for message in other["messages"]]
            own = _structured(
                await client.call_tool("list_dead_letters", narrowed | {"tenant_id": "initech"})
            )
            assert dead["sequence_number"] in [message["sequence_number"] for message in own["messages"]]
            elsewhere = _error(await client.call_tool("replay_dead_letter", sequence | {"tenant_id": "acme"}))
            assert elsewhere["error"] == "dead_letter_not_found"
            replayed = _structured(await client.call_tool("replay_dead_letter", sequence))
            assert replayed["status"] == "replayed"
            assert replayed["replay_message_id"] == f"{dead['message_id']}.replay.{dead['sequence_number']}"
            again = _error(await client.call_tool("replay_dead_letter", sequence))
            assert again["error"] == "dead_letter_not_found"
            # The copy fails the same way (the document itself is damaged): one new entry, the old gone.
            [copy] = await eventually(
                client,
                work_item,
                lambda found: [m["message_id"] for m in found] == [replayed["replay_message_id"]],
            )
            assert copy["reason"] == "processing_failed"

    asyncio.run(journey())
    text = log.read_text(encoding="utf-8")
    assert "operator tools: True" in text
    assert leaks({log: text}, tmp_path, list(SESSION_NEEDLES)) == []


def test_with_the_stack_down_the_server_starts_and_a_tool_call_says_why(tmp_path: Path) -> None:
    """No issuer, no API: claimcheck-mcp still serves over stdio (an agent runtime would otherwise see
    only "Connection closed"), lists its tools and answers each call with an `unavailable` tool error
    naming the unreachable issuer and how to start the stack."""
    down = f"http://127.0.0.1:{free_port()}"
    arguments = ["-m", "scripts.mcp_server", "--api", f"{down}/api", "--token-issuer", f"{down}/t/v2.0"]

    async def run() -> tuple[set[str], CallToolResult]:
        with (tmp_path / "mcp.log").open("w", encoding="utf-8") as errlog:
            parameters = StdioServerParameters(command=sys.executable, args=arguments, cwd=str(REPO))
            async with Client(stdio_client(parameters, errlog=errlog)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                return names, await client.call_tool("get_status", {"work_item_id": "wi-1"})

    names, result = asyncio.run(run())
    assert names == AGENT_TOOLS
    refusal = _error(result)
    assert refusal["error"] == "unavailable"
    assert "python -m local.stack" in refusal["message"]
