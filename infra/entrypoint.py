"""Reads the stack's config through Pulumi and deploys; separate from __main__ so tests can call it."""

from __future__ import annotations

from typing import Any

import pulumi

from infra.program import deploy
from infra.stack_config import PROJECT, load_settings


def stack_config_values() -> dict[str, Any]:
    """The project's config values as plain (JSON-decoded) data, keys without the `claimcheck:` prefix."""
    config = pulumi.Config(PROJECT)
    prefix = f"{PROJECT}:"
    values: dict[str, Any] = {}
    for full_key in pulumi.runtime.get_config_env():
        if full_key.startswith(prefix):
            key = full_key[len(prefix):]
            values[key] = config.get_object(key)
    return values


def run() -> None:
    deploy(load_settings(stack_config_values(), pulumi.get_stack()))
