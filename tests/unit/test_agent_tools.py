"""docs/agent-tools.json names exactly the states, actions and intake codes the API answers, is the
generated file, and covers every operation an agent calls."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from claimcheck import final_states
from claimcheck.client import ClaimCheckClient
from claimcheck.errors import IntakeRejected
from mcp import Client

from scripts import agent_tools
from scripts.mcp_server import build_server
from scripts.mcp_tools import AgentTools

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {tool["name"]: tool for tool in json.loads((ROOT / "docs" / "agent-tools.json").read_text())["tools"]}
OPENAPI = json.loads((ROOT / "functions" / "openapi.json").read_text())


def _leaf_codes(cls: type[IntakeRejected]) -> set[str]:
    return {cls.code}.union(*(_leaf_codes(sub) for sub in cls.__subclasses__()))


def test_wait_result_names_every_state_and_action() -> None:
    result = TOOLS["wait_for"]["result"]["properties"]
    view = OPENAPI["components"]["schemas"]["WorkItemView"]["properties"]
    constants = vars(final_states).items()
    states = {value for name, value in constants if name.isupper() and isinstance(value, str)}

    assert set(result["visibility"]["enum"]) == set(view["visibility"]["enum"])
    assert set(result["visibility"]["enum"]) <= states
    assert (
        set(result["next_action"]["enum"])
        == set(view["next_action"]["enum"])
        == {
            final_states.WAIT,
            final_states.PROCEED,
            final_states.STOP,
            final_states.RECONCILE,
            final_states.RE_READ,
        }
    )


def test_submit_result_names_every_intake_refusal() -> None:
    errors = TOOLS["submit_document"]["refusals"]["enum"]
    assert set(errors) == _leaf_codes(IntakeRejected)


def test_the_file_is_the_one_generated_from_the_contract() -> None:
    """docs/agent-tools.json is scripts/agent_tools.py's output: run `python -m scripts.agent_tools`."""
    assert (ROOT / "docs" / "agent-tools.json").read_text(encoding="utf-8") == agent_tools.render()


def test_every_operation_an_agent_calls_has_a_tool() -> None:
    """A new route of the API lands in a tool (or, named with its reason, among those no agent uses)."""
    operations = {
        operation["operationId"] for path in OPENAPI["paths"].values() for operation in path.values()
    }
    used = {operation for tool in TOOLS.values() for operation in tool["operations"]}
    assert used | set(agent_tools.NOT_AGENT_TOOLS) == operations
    assert not used & set(agent_tools.NOT_AGENT_TOOLS)


def test_each_tool_is_a_client_method_and_an_mcp_tool() -> None:
    """Each tool is the claimcheck.client method it names, and exactly the tool claimcheck-mcp lists to
    a non-operator: the same name and parameters (the file is generated from the server's tools, so a
    renamed tool, e.g. wait_for documented as wait_for_work_item, fails here and in the check above)."""
    for tool in TOOLS.values():
        owner, method = tool["backed_by"].split(".")
        assert owner == "ClaimCheckClient"
        assert callable(getattr(ClaimCheckClient, method))

    async def listed() -> dict[str, Any]:
        tools = AgentTools(ClaimCheckClient("http://127.0.0.1:9/api", lambda: "unused"), roots=[ROOT])
        async with Client(build_server(tools)) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    mcp_tools = asyncio.run(listed())
    assert set(mcp_tools) == set(TOOLS)
    for name, schema in mcp_tools.items():
        assert schema == TOOLS[name]["parameters"]


def test_the_docs_name_only_tools_the_server_has() -> None:
    """README.md and docs/*.md name each agent tool as claimcheck-mcp does."""
    names = set(TOOLS) | {"list_dead_letters", "replay_dead_letter"}
    pattern = re.compile(r"`(submit_\w+|wait_for\w*|get_status\w*|get_result\w*|\w*dead_letters?)`")
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        named = set(pattern.findall(page.read_text(encoding="utf-8")))
        assert named <= names, (page.name, named - names)
