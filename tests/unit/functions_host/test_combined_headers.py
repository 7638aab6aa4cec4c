"""How the local host hands request headers to the worker: one entry per name, repeated lines joined."""

from __future__ import annotations

from local.functions_host.http_server import combined_headers


def test_repeated_field_lines_are_joined_with_a_comma_whatever_their_case() -> None:
    fields = [("Authorization", "Bearer a"), ("X-Tenant-Id", "t-1"), ("authorization", "Bearer b")]
    assert combined_headers(fields) == {"Authorization": "Bearer a,Bearer b", "X-Tenant-Id": "t-1"}


def test_single_lines_pass_unchanged() -> None:
    assert combined_headers([("Content-Type", "text/plain")]) == {"Content-Type": "text/plain"}
