"""Runs last in this directory: everything logged by the claim-check tests is free of secrets."""

from __future__ import annotations

from local.azurite import ACCOUNT_KEY
from tests.integration.claimcheck.conftest import PAYLOAD_MARKER, SESSION_LOGS


def test_logs_hold_no_payload_bytes_sas_token_or_account_key() -> None:
    """No captured log line contains payload bytes, a SAS signature, an account key or a connection string."""
    assert SESSION_LOGS.lines, "the session handler captured nothing: the check would be empty"
    text = "\n".join(SESSION_LOGS.lines)
    for forbidden in (
        PAYLOAD_MARKER,
        "VERSION-ONE",
        "VERSION-TWO",
        "Supplier shall deliver",
        ACCOUNT_KEY,
        "AccountKey=",
        "sig=",
        "SharedAccessSignature",
    ):
        assert forbidden not in text, f"{forbidden[:12]}… leaked into the logs"
