"""The Function App's FUNCTIONS_REQUEST_BODY_SIZE_LIMIT (the Functions host's own request-body limit,
which bounds a request's memory on Azure) comes from the same inline cap the app enforces
(claimcheck:maxInlineRequestBytes -> CLAIMCHECK_MAX_INLINE_REQUEST_BYTES), and moves with it."""

from __future__ import annotations

import pytest
from claimcheck.settings import (
    FUNCTIONS_REQUEST_LIMIT_BYTES,
    HOST_REQUEST_LIMIT_SETTING,
    INLINE_REQUEST_MAX_BYTES,
    SETTING_NAMES,
    host_request_body_limit,
)

from infra.program import deploy
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from tests.infra.pulumi_harness import ProgramRun, run_program
from tests.infra.stacks import stack_run

CAP = SETTING_NAMES["max_inline_request_bytes"]


def _app_settings(run: ProgramRun) -> dict[str, str]:
    pairs = run.one("WebApp").inputs["siteConfig"]["appSettings"]
    return {pair["name"]: pair["value"] for pair in pairs}


def test_the_host_limit_is_derived_from_the_default_cap() -> None:
    settings = _app_settings(stack_run("dev")[1])
    assert settings[CAP] == str(INLINE_REQUEST_MAX_BYTES)
    assert settings[HOST_REQUEST_LIMIT_SETTING] == str(host_request_body_limit(INLINE_REQUEST_MAX_BYTES))


def test_the_host_limit_moves_with_a_configured_cap() -> None:
    cap = 8 * 1024 * 1024
    config = read_stack_config("dev") | {"maxInlineRequestBytes": cap}
    settings = _app_settings(run_program(lambda: deploy(load_settings(config, "dev")), stack="dev"))
    assert settings[CAP] == str(cap)
    assert settings[HOST_REQUEST_LIMIT_SETTING] == str(host_request_body_limit(cap))
    assert int(settings[HOST_REQUEST_LIMIT_SETTING]) < host_request_body_limit(INLINE_REQUEST_MAX_BYTES)


@pytest.mark.parametrize("bad", [0, FUNCTIONS_REQUEST_LIMIT_BYTES + 1, "32MiB", True])
def test_a_cap_out_of_range_is_refused_naming_the_key(bad: object) -> None:
    with pytest.raises(StackConfigError, match="claimcheck:maxInlineRequestBytes"):
        load_settings(read_stack_config("dev") | {"maxInlineRequestBytes": bad}, "dev")
