"""The `stack` fixture: each infra test that takes it runs for the dev and the prod stack."""

from __future__ import annotations

import pytest

from tests.infra.stacks import STACKS, Stack, stack_run


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> Stack:
    return stack_run(request.param)
