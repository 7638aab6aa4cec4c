"""Writes docs/agent-tools.json: the claim-check tools for LLM tool-calling, backed by claimcheck.client.

`python -m scripts.agent_tools` rewrites the file; `--check` only says whether it is current (exit 1
if not); tests/unit/test_agent_tools.py runs the check. What the API answers is not repeated here: the
result schemas, states and actions come from functions/openapi.json (the HTTP contract a test keeps
in step with the routes), the intake refusal codes from claimcheck.errors. This module holds only what
is the tools' own: names, descriptions, parameters and which client method and route each one uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from claimcheck.errors import IntakeRejected

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "agent-tools.json"
OPENAPI = ROOT / "functions" / "openapi.json"

# Operations of the API that no agent tool uses, and why (a new route must land in a tool or here).
NOT_AGENT_TOOLS = {
    "listDeadLetters": "operators: claimcheck-mcp's operator tools, claimcheck-ops dlq",
    "replayDeadLetter": "operators: claimcheck-mcp's operator tools, claimcheck-ops dlq",
    "getOpenApiDocument": "the contract itself",
}


def intake_refusal_codes() -> list[str]:
    """Every code a refused intake answers (the leaves of claimcheck.errors.IntakeRejected), sorted."""

    def leaves(cls: type[IntakeRejected]) -> set[str]:
        return {cls.code}.union(*(leaves(sub) for sub in cls.__subclasses__()))

    return sorted(leaves(IntakeRejected))


def tools(openapi: dict[str, Any]) -> list[dict[str, Any]]:
    schemas = openapi["components"]["schemas"]
    view = schemas["WorkItemView"]["properties"]
    work_item_id = {"type": "string", "description": "The work item id from the receipt."}
    return [
        {
            "name": "submit_document",
            "description": "Submit a document for processing exactly once. Reuse the same idempotency_key "
            "when retrying the same submission; to write a new version of an existing work item pass "
            "work_item_id and if_match (the version you last read).",
            "backed_by": "ClaimCheckClient.submit",
            # Large documents go through the upload flow; the client picks it by size.
            "operations": ["submitDocument", "startUpload", "commitUpload"],
            "parameters": {
                "type": "object",
                "required": ["path", "tenant_id", "purpose", "classification", "content_type"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string", "description": "Local path of the document."},
                    "tenant_id": {"type": "string"},
                    "purpose": {
                        "type": "string",
                        "enum": ["bulk-ingest", "contract-review", "evidence-archive"],
                    },
                    "classification": {
                        "type": "string",
                        "enum": ["public", "internal", "confidential", "restricted"],
                    },
                    "content_type": {"type": "string", "examples": ["text/plain", "application/pdf"]},
                    "work_item_id": {
                        "type": "string",
                        "description": "Only for a new version of an existing work item.",
                    },
                    "if_match": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "The current version you read; required with work_item_id of an "
                        "existing work item.",
                    },
                    "idempotency_key": {
                        "type": "string",
                        "maxLength": 255,
                        "description": "Same key for every retry of this submission.",
                    },
                },
            },
            "result": {
                "type": "object",
                "required": ["work_item_id", "version", "idempotency_key", "replayed"],
                "properties": {
                    "work_item_id": {"type": "string"},
                    "version": {"type": "integer"},
                    "idempotency_key": {"type": "string"},
                    "replayed": {
                        "type": "boolean",
                        "description": "True: an earlier attempt already wrote this; "
                        "nothing new was written.",
                    },
                    "error": {
                        "type": "string",
                        "enum": intake_refusal_codes(),
                        "description": "On refusal. conflict_detected / precondition_required: read the "
                        "work item again (current_version) before deciding.",
                    },
                    "current_version": {"type": "integer"},
                },
            },
        },
        {
            "name": "wait_for_work_item",
            "description": "Wait (bounded) until the submitted version is visible and processed, or the API "
            "names another final state. Never resubmit because a read did not show the write yet.",
            "backed_by": "ClaimCheckClient.wait",
            "operations": ["getWorkItem"],
            "parameters": {
                "type": "object",
                "required": ["work_item_id", "version"],
                "additionalProperties": False,
                "properties": {
                    "work_item_id": {"type": "string"},
                    "version": {"type": "integer", "minimum": 1},
                    "deadline_seconds": {"type": "number", "minimum": 1, "maximum": 900, "default": 120},
                },
            },
            "result": {
                "type": "object",
                "required": ["visibility", "next_action", "version", "exhausted"],
                "properties": {
                    "visibility": {"type": "string", "enum": view["visibility"]["enum"]},
                    "next_action": {
                        "type": "string",
                        "enum": view["next_action"]["enum"],
                        "description": "proceed: use the result; wait: call again later (retry_after); "
                        "stop: the version was never accepted; reconcile: hand over to an operator, do not "
                        "write; re_read: someone wrote a newer version, re-read and re-decide.",
                    },
                    "version": {"type": "integer"},
                    "retry_after": {"type": ["integer", "null"]},
                    "exhausted": {
                        "type": "boolean",
                        "description": "The deadline or attempts ran out while the API still said wait.",
                    },
                    "result": {
                        "type": ["object", "null"],
                        "description": "The result summary once processing completed.",
                    },
                },
            },
        },
        {
            "name": "get_status",
            "description": "Read a work item's state once (does not wait): visibility and next_action for "
            "at least min_version. Another tenant's work item reads like an unknown one (not_found).",
            "backed_by": "ClaimCheckClient.status",
            "operations": ["getWorkItem"],
            "parameters": {
                "type": "object",
                "required": ["work_item_id"],
                "additionalProperties": False,
                "properties": {
                    "work_item_id": work_item_id,
                    "min_version": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Read at least this version (your receipt's version).",
                    },
                },
            },
            "result": schemas["WorkItemView"],
        },
        {
            "name": "get_result",
            "description": "The full analysis of a processed version (parties, dates, obligations with "
            "pages; never the document's bytes). Call it once wait_for_work_item answered proceed; a "
            "version without a result yet answers no_result with its state.",
            "backed_by": "ClaimCheckClient.result",
            "operations": ["getWorkItemResult"],
            "parameters": {
                "type": "object",
                "required": ["work_item_id"],
                "additionalProperties": False,
                "properties": {
                    "work_item_id": work_item_id,
                    "version": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Default: the latest visible version.",
                    },
                },
            },
            "result": schemas["WorkItemResult"],
        },
    ]


def render() -> str:
    openapi = json.loads(OPENAPI.read_text(encoding="utf-8"))
    document = {
        "description": "Claim-check tools for LLM tool-calling (JSON Schema parameters and results), "
        "generated by scripts/agent_tools.py from functions/openapi.json. Each tool is the "
        "claimcheck.client method named in backed_by, calling the API operations named in operations. "
        "The agent acts only on next_action.",
        "tools": tools(openapi),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.agent_tools", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    args = parser.parse_args(argv)
    text = render()
    current = DOCUMENT.read_text(encoding="utf-8") if DOCUMENT.exists() else ""
    if args.check:
        if current != text:
            print(
                f"{DOCUMENT.relative_to(ROOT)} is stale: run python -m scripts.agent_tools", file=sys.stderr
            )
            return 1
        return 0
    DOCUMENT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
