"""claimcheck-mcp: the claim-check stack as Model Context Protocol tools, over stdio or streamable HTTP.

An agent runtime launches ``claimcheck-mcp`` (stdio) or connects to ``claimcheck-mcp --transport http``
on loopback. Every tool calls the stack's HTTP API with the server's own identity: a token from
``DefaultAzureCredential`` for ``<audience>/.default`` on Azure, from the local issuer for a loopback API
(scripts/ops_token.py, shared with claimcheck-ops). It holds no storage or Service Bus credential and
adds no privilege: the API checks the token's roles and tenants on every call.

Built on the official MCP Python SDK (``mcp``, its ``MCPServer``). What the tools do is in
scripts/mcp_tools.py; this module gives them their schemas and descriptions, and maps refusals to MCP
tool errors. Tokens and document bytes are never logged; the SDK logs a failed tool's message only,
which names codes and ids.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from claimcheck.access import TENANT_ID
from claimcheck.callers import AppRole
from claimcheck.client import ClaimCheckClient
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from scripts.mcp_tools import DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS, AgentTools, ToolRefusal
from scripts.ops_errors import OpsError
from scripts.ops_local import issuer_default, running_stack
from scripts.ops_token import TokenSource

logger = logging.getLogger("claimcheck.mcp")

DEFAULT_API = "http://127.0.0.1:7071/api"
DEFAULT_HTTP_PORT = 8765
# The local identity an agent uses when none is named (local/identity/identities.py).
DEFAULT_LOCAL_CLIENT = "local-producer"
# Fetch a new token this long before the current one expires.
TOKEN_REFRESH_MARGIN_SECONDS = 300
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

INSTRUCTIONS = (
    "Claim-check tools: submit a document once (submit_document), wait for a final state (wait_for), "
    "then read the analysis (get_result). Act only on next_action: proceed → get_result; wait → call "
    "wait_for again later; stop/reconcile/re_read are errors with a remedy. Never submit a document "
    "again because a read did not show it yet: a retry with the same arguments returns the same receipt."
)

Purpose = Literal["contract-review", "evidence-archive", "bulk-ingest"]
Classification = Literal["public", "internal", "confidential", "restricted"]
WorkItemId = Annotated[
    str,
    Field(
        description="The work item id from a receipt (1-64 letters, digits, '.', '_', ':', '-').",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$",
    ),
]

# Narrows an operator tool to one tenant (X-Tenant-Id); the API decides what the identity may see, so a
# tenant it is not granted lists nothing and replays nothing. The pattern is the API's tenant id rule.
SelectedTenant = Annotated[
    str | None,
    Field(
        description="Only this one of the tenants this identity is granted (default: all of them).",
        pattern=f"^{TENANT_ID.pattern}$",
    ),
]


class SubmitReceipt(BaseModel):
    work_item_id: str
    version: int = Field(description="The version this submission wrote (or had written, if replayed).")
    replayed: bool = Field(description="True: an earlier identical call already wrote it; nothing new.")
    idempotency_key: str
    receipt: dict[str, Any] = Field(description="The write receipt: version, sha256, visibility deadline.")
    next_step: str


class WorkItemStatus(BaseModel):
    work_item_id: str | None
    state: str | None = Field(description="accepted, running, completed, failed, expired, or a visibility.")
    version: int | None
    visibility: str | None = Field(description="The read-after-write state (version_confirmed, ...).")
    next_action: str = Field(description="proceed, wait, stop, reconcile or re_read: act only on this.")
    retry_after: int | None = Field(description="With wait: seconds before reading again.")
    payload_state: str | None
    failure_reason: str | None
    receipt_versions: list[int]
    result_summary: dict[str, Any] | None = Field(description="Counts once processed; see get_result.")
    next_step: str


class WaitOutcome(WorkItemStatus):
    exhausted: bool = Field(description="True: the timeout ran out while the API still said wait.")


class Obligation(BaseModel):
    party: str | None
    text: str = Field(description="The obligation sentence (at most 300 characters).")
    due_date: str | None = Field(description="An ISO date, or a relative deadline kept verbatim.")
    page: int = Field(description="1-based page of the document where it appears.")


class AnalysisResult(BaseModel):
    work_item_id: str
    version: int | None
    completed_at: str | None
    document_type: str | None
    parties: list[str]
    dates: list[str]
    obligations: list[Obligation]
    page_count: int | None
    review_required: bool | None
    priority: str | None
    truncated: bool


class CachedToken:
    """The server's bearer token, fetched again shortly before it expires (never logged)."""

    def __init__(self, fetch: Callable[[], str], clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self._clock = clock
        self._token = ""
        self._expires = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if self._clock() >= self._expires - TOKEN_REFRESH_MARGIN_SECONDS:
                self._token = self._fetch()
                self._expires = float(claims_of(self._token).get("exp", 0) or 0)
            return self._token

    def refresh(self) -> None:
        """Fetch a new token now: the API refused the current one before its expiry (revoked, or its
        signing key rotated), so the expiry it states no longer says whether it is good."""
        with self._lock:
            self._token = self._fetch()
            self._expires = float(claims_of(self._token).get("exp", 0) or 0)

    def roles(self) -> frozenset[str]:
        """The app roles the current token carries (to list only the tools this identity may use)."""
        return frozenset(str(role) for role in claims_of(self()).get("roles", []) or [])


def claims_of(token: str) -> dict[str, Any]:
    """The token's claims, unverified: it is our own token, read only for its expiry and roles (the API
    verifies it on every call). Anything unreadable reads as no claims."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def build_server(tools: AgentTools, *, operator: bool = False, token: CachedToken | None = None) -> MCPServer:
    """The MCP server with the agent tools (and, for an operator identity, the operator tools).

    ``token``: the tools' token; on a 401 it is fetched again and the call made once more."""
    server = MCPServer("claimcheck", instructions=INSTRUCTIONS, log_level="INFO")

    def refusing(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The tool's answer, or its refusal as an MCP tool error. Logs codes and ids only."""
        try:
            answer = _once_more_after_a_401(call, token)
        except ToolRefusal as refusal:
            logger.info("refused: %s (HTTP %s)", refusal.code, refusal.status)
            raise ToolError(refusal.text()) from None
        except OpsError as error:  # no token: the issuer (the local stack) or Entra ID is unreachable
            logger.warning("no token: %s", error)
            raise ToolError(ToolRefusal("unavailable", f"no token for the API: {error}").text()) from None
        logger.info("answered: work item %s version %s", answer.get("work_item_id"), answer.get("version"))
        return answer

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    def submit_document(
        tenant_id: Annotated[str, Field(description="The tenant that owns the document.")],
        purpose: Annotated[Purpose, Field(description="What the document is for; each allows its types.")],
        classification: Annotated[Classification, Field(description="How sensitive the document is.")],
        content_type: Annotated[
            str, Field(description="The document's type: text/plain, application/pdf, ...")
        ],
        path: Annotated[
            str | None, Field(description="A file inside the server's allowed folders (or content_base64).")
        ] = None,
        content_base64: Annotated[
            str | None, Field(description="The document itself, base64 (or path); at most 8 MiB.")
        ] = None,
        work_item_id: Annotated[
            WorkItemId | None, Field(description="Only to add a new version to an existing work item.")
        ] = None,
        if_match_version: Annotated[
            int | None,
            Field(
                ge=0, description="With work_item_id: the current version you read (get_status 'version')."
            ),
        ] = None,
    ) -> SubmitReceipt:
        """Submit a document once and get its write receipt. Calling again with the same arguments is safe:
        it returns the same receipt and writes nothing new. Next: wait_for(work_item_id, min_version)."""
        answer = refusing(
            lambda: tools.submit_document(
                tenant_id=tenant_id,
                purpose=purpose,
                classification=classification,
                content_type=content_type,
                path=path,
                content_base64=content_base64,
                work_item_id=work_item_id,
                if_match_version=if_match_version,
            )
        )
        return SubmitReceipt.model_validate(answer)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_status(
        work_item_id: WorkItemId,
        min_version: Annotated[
            int | None, Field(ge=1, description="Read at least this version (your receipt's version).")
        ] = None,
    ) -> WorkItemStatus:
        """Read a work item's state once: visibility, next_action and retry_after. Does not wait."""
        answer = refusing(lambda: tools.get_status(work_item_id=work_item_id, min_version=min_version))
        return WorkItemStatus.model_validate(answer)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def wait_for(
        work_item_id: WorkItemId,
        min_version: Annotated[int, Field(ge=1, description="The version from your receipt.")],
        timeout_seconds: Annotated[
            float,
            Field(ge=1, le=MAX_WAIT_SECONDS, description="Longest time to wait, in seconds (bounded)."),
        ] = DEFAULT_WAIT_SECONDS,
    ) -> WaitOutcome:
        """Wait (bounded) until the version is visible and processed. next_action proceed: call get_result.
        exhausted: not done yet, call wait_for again later. stop/reconcile/re_read come back as errors."""
        answer = refusing(
            lambda: tools.wait_for(
                work_item_id=work_item_id, min_version=min_version, timeout_seconds=timeout_seconds
            )
        )
        return WaitOutcome.model_validate(answer)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_result(
        work_item_id: WorkItemId,
        version: Annotated[
            int | None, Field(ge=1, description="Default: the latest visible version.")
        ] = None,
    ) -> AnalysisResult:
        """The analysis of a processed version: parties, dates, and obligations with party, due date and
        page. Never the document's bytes. Call it after wait_for answered proceed."""
        answer = refusing(lambda: tools.get_result(work_item_id=work_item_id, version=version))
        return AnalysisResult.model_validate(answer)

    if operator:
        _add_operator_tools(server, tools, refusing)
    return server


def _once_more_after_a_401(call: Callable[[], dict[str, Any]], token: CachedToken | None) -> dict[str, Any]:
    """``call()``; after a 401 (a token refused before the expiry it states: revoked, or its signing key
    rotated) a new token and ``call()`` once more. Once: a second 401 is the refusal, never a loop.

    Calling again is safe for every tool: the API refuses a bad token before doing anything, a
    submission carries the same idempotency key, and a replay's copy the same message id."""
    try:
        return call()
    except ToolRefusal as refusal:
        if refusal.status != 401 or token is None:
            raise
        logger.info("refused: unauthenticated (HTTP 401); fetching a new token, then calling once more")
        try:
            token.refresh()
        except OpsError as error:  # no new token: the refusal stands (the error names no secret)
            logger.warning("no new token: %s", error)
            raise refusal from None
    return call()


class DeadLetter(BaseModel):
    sequence_number: int
    message_id: str | None
    work_item_id: str | None
    tenant: str | None
    purpose: str | None
    enqueued_at: str | None
    delivery_count: int | None
    reason: str | None = Field(description="Why it was dead-lettered (the documented set).")
    description: str | None


class DeadLetters(BaseModel):
    queue: str | None
    messages: list[DeadLetter]


class Replayed(BaseModel):
    sequence_number: int
    status: str = Field(description="replayed, or sent_not_completed (replay again: de-duplicated).")
    detail: str
    original_message_id: str | None
    replay_message_id: str | None


def _add_operator_tools(
    server: MCPServer, tools: AgentTools, refusing: Callable[[Callable[[], dict[str, Any]]], dict[str, Any]]
) -> None:
    """Listed only for an identity whose token holds Operations.Manage (the API checks it again)."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_dead_letters(
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many messages.")] = 50,
        tenant_id: SelectedTenant = None,
    ) -> DeadLetters:
        """Operators: the documents queue's dead-lettered messages with reason and description (metadata
        only, never a body), of the tenants this identity is granted: by the work item's own record,
        never by what a message states about itself."""
        return DeadLetters.model_validate(
            refusing(lambda: tools.list_dead_letters(limit=limit, tenant_id=tenant_id))
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    def replay_dead_letter(
        sequence_number: Annotated[int, Field(ge=1, description="From list_dead_letters.")],
        tenant_id: SelectedTenant = None,
    ) -> Replayed:
        """Operators: after the cause is fixed, send one dead-lettered message back to the documents queue,
        exactly once (a repeated replay is de-duplicated)."""
        return Replayed.model_validate(
            refusing(lambda: tools.replay_dead_letter(sequence_number=sequence_number, tenant_id=tenant_id))
        )


def _running_api() -> str | None:
    stack = running_stack()
    return None if stack is None else stack.api


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="claimcheck-mcp",
        description="The claim-check stack as MCP tools (stdio for agent runtimes, or HTTP on loopback).",
    )
    parser.add_argument(
        "--api",
        default=os.environ.get("CLAIMCHECK_API_URL") or os.environ.get("CLAIMCHECK_API"),
        help="the Function App API's base URL, https://HOST/api (env CLAIMCHECK_API_URL or, as "
        f"claimcheck-ops, CLAIMCHECK_API; default: the running local stack's, else {DEFAULT_API})",
    )
    parser.add_argument(
        "--audience",
        default=os.environ.get("CLAIMCHECK_API_AUDIENCE"),
        help="Azure: the API's application ID URI (pulumi stack output apiAudience); the token is "
        "DefaultAzureCredential's for AUDIENCE/.default (env CLAIMCHECK_API_AUDIENCE)",
    )
    parser.add_argument(
        "--token-issuer",
        default=os.environ.get("CLAIMCHECK_TOKEN_ISSUER"),
        help="the local token issuer's URL, as python -m local.stack prints it (env "
        "CLAIMCHECK_TOKEN_ISSUER; default for a loopback --api: the issuer on port 7090)",
    )
    parser.add_argument(
        "--client-id",
        default=os.environ.get("CLAIMCHECK_CLIENT_ID", DEFAULT_LOCAL_CLIENT),
        help="local issuer only: which local identity (Azure: the signed-in DefaultAzureCredential)",
    )
    parser.add_argument(
        "--function-key",
        default=os.environ.get("CLAIMCHECK_API_KEY"),
        help="Azure: the Function App's function key (better: CLAIMCHECK_API_KEY, not on a command line)",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (an agent runtime launches the server) or http (streamable HTTP on loopback); "
        "default: %(default)s",
    )
    parser.add_argument("--host", default="127.0.0.1", help="http only: a loopback address")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_HTTP_PORT, help="http only: the port (default: %(default)s)"
    )
    parser.add_argument(
        "--root",
        action="append",
        type=Path,
        help="a folder submit_document may read files from (repeatable; default: the current folder)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)  # credential chatter; never a token either way
    if args.transport == "http" and args.host not in _LOOPBACK_HOSTS:
        # Whoever reaches the port acts with this server's identity: loopback only.
        print(f"error: --host {args.host} is not a loopback address", file=sys.stderr)
        return 2
    # The running local stack (python -m local.stack, on whatever ports) when nothing else is named.
    args.api = args.api or _running_api() or DEFAULT_API
    issuer = issuer_default(args.api, args.token_issuer)
    source = TokenSource(audience=args.audience, issuer=issuer, client_id=args.client_id)
    token = CachedToken(lambda: source.token(args.api))
    try:
        client = ClaimCheckClient(args.api, token, function_key=args.function_key)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        roles = token.roles()
    except OpsError as error:
        # The stack (or Entra ID) is not reachable yet: serve anyway, so the agent runtime sees tools
        # that answer a clear `unavailable` error rather than a server that died ("Connection closed").
        logger.warning(
            "no token yet (%s); serving: each tool call answers unavailable until a token can be had; "
            "operator tools are listed only when the token read at start grants them (restart then)",
            error,
        )
        roles = frozenset()
    tools = AgentTools(client, roots=args.root or [Path.cwd()])
    operator = str(AppRole.OPERATE) in roles
    server = build_server(tools, operator=operator, token=token)
    logger.info("serving %s over %s (operator tools: %s)", args.api, args.transport, operator)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
