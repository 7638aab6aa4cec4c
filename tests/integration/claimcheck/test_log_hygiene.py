"""Log hygiene of the claim-check tests: the package's finalizer (conftest ``_record_all_logs``) scans
every line logged while they ran, after the last one, whatever the order. These tests prove that the
capture sees what the code logs and that the scan would catch a leak, so the check is not empty."""

from __future__ import annotations

import logging

import pytest

from tests.integration.claimcheck.conftest import FORBIDDEN_IN_LOGS, SESSION_LOGS, assert_no_leaks


def test_the_session_handler_captures_what_the_code_logs() -> None:
    """A line logged by a claimcheck module lands in the lines the finalizer scans."""
    logging.getLogger("claimcheck.consumer").info("log-capture canary")
    assert SESSION_LOGS.lines, "the session handler captured nothing: the check would be empty"
    assert SESSION_LOGS.lines[-1] == "claimcheck.consumer: log-capture canary"


@pytest.mark.parametrize("forbidden", FORBIDDEN_IN_LOGS)
def test_the_scan_fails_on_each_forbidden_text(forbidden: str) -> None:
    """Each forbidden text inside an otherwise harmless line fails the scan."""
    with pytest.raises(AssertionError, match="leaked into the logs"):
        assert_no_leaks(["claimcheck.consumer: ok", f"claimcheck.consumer: before {forbidden} after"])
    assert_no_leaks(["claimcheck.consumer: ok"])
