"""docs/agent-tools.json names exactly the states, actions and intake codes the API answers."""

from __future__ import annotations

import json
from pathlib import Path

from claimcheck import final_states
from claimcheck.errors import IntakeRejected

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {tool["name"]: tool for tool in json.loads((ROOT / "docs" / "agent-tools.json").read_text())["tools"]}
OPENAPI = json.loads((ROOT / "functions" / "openapi.json").read_text())


def _leaf_codes(cls: type[IntakeRejected]) -> set[str]:
    return {cls.code}.union(*(_leaf_codes(sub) for sub in cls.__subclasses__()))


def test_wait_result_names_every_state_and_action() -> None:
    result = TOOLS["wait_for_work_item"]["result"]["properties"]
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
    errors = TOOLS["submit_document"]["result"]["properties"]["error"]["enum"]
    assert set(errors) == _leaf_codes(IntakeRejected)
