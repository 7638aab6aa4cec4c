"""Every preview Azure REST API version the program registers is listed, with its version and why
(infra/api_versions.py); every other resource uses a GA version."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from infra.api_versions import PREVIEW_API_VERSIONS
from tests.infra.stacks import STACKS, stack_run


def api_version(type_token: str) -> str | None:
    """The REST API version pulumi-azure-native's class for `type_token` uses (its docstring says);
    None for the provider's own resources (e.g. servicebus:DefaultRule) that name none."""
    _, module, name = type_token.split(":")
    cls = getattr(importlib.import_module(f"pulumi_azure_native.{module}"), name)
    source = inspect.getsource(inspect.getmodule(cls) or cls)
    found = re.search(r"Uses Azure REST API version (\S+?)\.", source)
    return found.group(1) if found else None


def _versions() -> dict[str, str | None]:
    types = {r.type for stack in STACKS for r in stack_run(stack)[1].resources}
    return {t: api_version(t) for t in sorted(types) if t.startswith("azure-native:")}


def test_preview_versions_are_exactly_the_listed_ones() -> None:
    previews = {t: v for t, v in _versions().items() if v and "preview" in v}
    listed = {t: version for t, (version, _) in PREVIEW_API_VERSIONS.items()}
    assert previews == listed
    assert all(reason for _, reason in PREVIEW_API_VERSIONS.values())


@pytest.mark.parametrize("token", ["azure-native:authorization:RoleAssignment", "azure-native:storage:Table"])
def test_the_version_is_read_from_the_sdk(token: str) -> None:
    assert api_version(token) in {"2022-04-01", "2024-01-01"}
