"""Reads the stack's config through Pulumi and deploys; separate from __main__ so tests can call it."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from infra.program import deploy
from infra.stack_config import PROJECT, StackConfigError, load_settings
from infra.topology import TopologyError


def stack_config_values() -> dict[str, Any]:
    """The project's config values as plain data, keys without the `claimcheck:` prefix.

    The language host hands config over as strings: numbers, booleans, lists and objects JSON-encoded,
    plain strings as they are. Every `claimcheck:*` key is read, so an unknown (misspelt) key is
    reported by load_settings instead of being ignored.
    """
    config = pulumi.Config(PROJECT)
    prefix = f"{PROJECT}:"
    values: dict[str, Any] = {}
    for full_key in pulumi.runtime.get_config_env():
        if full_key.startswith(prefix):
            key = full_key[len(prefix) :]
            values[key] = _decode(config.require(key))
    return values


def _decode(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def run() -> None:
    try:
        settings = load_settings(stack_config_values(), pulumi.get_stack())
    except (StackConfigError, TopologyError) as error:
        # RunError: Pulumi prints the message alone, without a Python traceback.
        raise pulumi.RunError(str(error)) from None
    deploy(settings)
