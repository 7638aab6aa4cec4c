"""make demo-agent: a scripted agent (no model) uses the stack through claimcheck-mcp, step by step.

It starts the local stack, launches ``claimcheck-mcp`` over stdio exactly as an agent runtime would
(``python -m scripts.mcp_server`` with the local identity ``local-producer``), and through the MCP SDK's
client: lists the tools, submits a sample contract, retries the same call (same receipt), waits for a
final state, reads the obligations, then makes one refused call (a tenant the identity is not granted).
Exits 0 only if every step answered as expected.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from local.processes import interrupt_handler
from local.stack import INTERRUPTED, LocalStack, start_stack

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "contracts" / "supply-agreement.pdf"
AGENT_IDENTITY = "local-producer"
WAIT_SECONDS = 180


class Steps:
    def __init__(self) -> None:
        self.number = 0
        self.failed: list[str] = []

    def show(self, title: str, call: str, answer: str, ok: bool) -> None:
        self.number += 1
        mark = "ok " if ok else "FAIL"
        print(f"\n[{mark}] {self.number}. {title}\n      call:   {call}\n      answer: {answer}", flush=True)
        if not ok:
            self.failed.append(title)


async def run_agent(stack: LocalStack, steps: Steps) -> None:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "scripts.mcp_server",
            "--api",
            stack.api_url,
            "--token-issuer",
            stack.minter.issuer,
            "--client-id",
            AGENT_IDENTITY,
            "--root",
            str(SAMPLE.parent),
        ],
        # The server's stderr (its log) goes to the stack's folder, which is removed at the end.
        cwd=str(REPO),
    )
    log = stack.work_dir / "claimcheck-mcp.log"
    with log.open("w", encoding="utf-8") as errlog:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(parameters, errlog=errlog)) as client:
            await _journey(client, steps)


async def _journey(client: Client, steps: Steps) -> None:
    tools = sorted(tool.name for tool in (await client.list_tools()).tools)
    steps.show("list the tools", "tools/list", ", ".join(tools), "submit_document" in tools)

    arguments = {
        "tenant_id": "acme",
        "purpose": "contract-review",
        "classification": "confidential",
        "content_type": "application/pdf",
        "path": str(SAMPLE),
    }
    receipt = await _call(client, steps, "submit a contract", "submit_document", arguments, _ok)
    if receipt is None:
        return
    again = await _call(client, steps, "the model retries the same call", "submit_document", arguments, _ok)
    same = again is not None and (again["work_item_id"], again["version"]) == (
        receipt["work_item_id"],
        receipt["version"],
    )
    replayed = again is not None and again["replayed"] is True
    steps.show(
        "the retry wrote nothing new",
        "compare the two receipts",
        f"same work item and version: {same}, replayed: {replayed}",
        same and replayed,
    )
    work_item = {"work_item_id": receipt["work_item_id"]}
    waited = await _call(
        client,
        steps,
        "wait (bounded) for a final state",
        "wait_for",
        work_item | {"min_version": receipt["version"], "timeout_seconds": WAIT_SECONDS},
        lambda answer: answer.get("next_action") == "proceed",
    )
    if waited is None:
        return
    result = await _call(client, steps, "read the obligations", "get_result", work_item, _ok)
    if result is not None:
        for obligation in result["obligations"]:
            party, due = obligation["party"] or "?", obligation["due_date"] or "-"
            print(f"      p.{obligation['page']}  {party:<28} due {due:<12} {obligation['text'][:60]}")
    refused = await client.call_tool("submit_document", arguments | {"tenant_id": "umbrella"})
    text = _text(refused)
    steps.show(
        "one refused call: a tenant this identity is not granted",
        "submit_document(tenant_id='umbrella', ...)",
        text,
        refused.is_error and '"error": "forbidden"' in text,
    )


async def _call(
    client: Client,
    steps: Steps,
    title: str,
    tool: str,
    arguments: dict[str, Any],
    expected: Callable[[dict[str, Any]], bool],
) -> dict[str, Any] | None:
    answer = await client.call_tool(tool, arguments)
    structured = answer.structured_content if isinstance(answer.structured_content, dict) else None
    shown = {key: value for key, value in (structured or {}).items() if key not in ("obligations", "receipt")}
    ok = not answer.is_error and structured is not None and expected(structured)
    shown_arguments = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    steps.show(title, f"{tool}({shown_arguments})", json.dumps(shown) if structured else _text(answer), ok)
    return structured if ok else None


def _ok(_: dict[str, Any]) -> bool:
    return True


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def main() -> int:
    """The scripted agent; Ctrl-C at any point stops the stack, says so in one line and exits 130."""
    signal.signal(signal.SIGINT, interrupt_handler)  # KeyboardInterrupt, never lost in a fork
    print("Starting the local stack:", flush=True)
    steps = Steps()
    try:
        with start_stack(progress=lambda line: print(line, flush=True)) as stack:
            print(
                f"API {stack.api_url}; the agent runs claimcheck-mcp over stdio as {AGENT_IDENTITY}",
                flush=True,
            )
            asyncio.run(run_agent(stack, steps))
            print("\nStopping the local stack…", flush=True)
    except KeyboardInterrupt:  # start_stack or the stack's stop() took everything down
        print("interrupted; stack stopped", file=sys.stderr, flush=True)
        return INTERRUPTED
    if steps.failed:
        print(f"{len(steps.failed)} step(s) did not answer as expected: {', '.join(steps.failed)}")
        return 1
    print(f"All {steps.number} steps answered as expected.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
