"""The Functions host's request-body limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT) is derived from intake's
inline cap by one function: a body the app accepts is never refused by the host, a document of exactly
the cap sent as multipart still reaches the app (which answers use_direct_upload), and the limit moves
with the cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claimcheck.errors import UseDirectUpload
from claimcheck.http_api import (
    DOCUMENT_PART,
    FORM_FIELDS,
    MAX_FIELD_BYTES,
    MAX_MULTIPART_PARTS,
    MAX_PART_HEADER_BYTES,
    MAX_PART_HEADERS,
    inline_body,
    read_submission,
)
from claimcheck.settings import (
    FUNCTIONS_REQUEST_LIMIT_BYTES,
    HOST_REQUEST_LIMIT_SETTING,
    HOST_REQUEST_MARGIN_BYTES,
    INLINE_REQUEST_MAX_BYTES,
    Settings,
    host_request_body_limit,
)

# RFC 2046 §5.1.1: a boundary is at most 70 characters.
MAX_BOUNDARY = 70


def _most_framing() -> int:
    """The most bytes besides the document a multipart body can carry that http_api's parser accepts:
    every part it allows, each with the most header lines of the longest length, the longest boundary,
    and every non-document part at the field limit."""
    delimiter = len(b"--") + MAX_BOUNDARY + len(b"\r\n")
    headers = MAX_PART_HEADERS * (MAX_PART_HEADER_BYTES + len(b"\r\n")) + len(b"\r\n")
    per_part = delimiter + headers + len(b"\r\n")  # the CRLF before the next delimiter
    closing = len(b"--") + MAX_BOUNDARY + len(b"--\r\n")
    return MAX_MULTIPART_PARTS * per_part + (MAX_MULTIPART_PARTS - 1) * MAX_FIELD_BYTES + closing


def _multipart(document: bytes, boundary: str) -> bytes:
    """A valid intake request: the document part and every form field, each with padded part headers."""
    padding = "x" * (MAX_PART_HEADER_BYTES - 64)
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{DOCUMENT_PART}"; filename="doc.txt"\r\n'
        f"Content-Type: text/plain\r\nX-Padding: {padding}\r\n\r\n".encode()
        + document
        + b"\r\n"
    ]
    values = {"tenant_id": "acme", "purpose": "contract-review", "classification": "internal"}
    for name in sorted(FORM_FIELDS):
        value = values.get(name, "v" * (MAX_FIELD_BYTES // 2) if name == "correlation_id" else "")
        if value:
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\nX-Padding: {padding}'
                f"\r\n\r\n{value}\r\n".encode()
            )
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def test_the_host_limit_is_the_cap_plus_the_margin_and_moves_with_it() -> None:
    for cap in (1, 2 * 1024 * 1024, INLINE_REQUEST_MAX_BYTES, FUNCTIONS_REQUEST_LIMIT_BYTES):
        assert host_request_body_limit(cap) == cap + HOST_REQUEST_MARGIN_BYTES
    assert (
        host_request_body_limit(INLINE_REQUEST_MAX_BYTES + 1)
        == host_request_body_limit(INLINE_REQUEST_MAX_BYTES) + 1
    )


def test_the_margin_covers_the_most_multipart_framing_the_app_reads() -> None:
    assert _most_framing() <= HOST_REQUEST_MARGIN_BYTES


@pytest.mark.parametrize("cap", [4096, 64 * 1024])
def test_a_document_of_exactly_the_cap_as_multipart_reaches_the_app_and_is_told_to_upload(cap: int) -> None:
    """Over the cap by its framing only, the body stays within the host's limit: the app, not the host,
    answers it (use_direct_upload). The same framing around a smaller document is an accepted request."""
    boundary = "b" * MAX_BOUNDARY
    body = _multipart(b"d" * cap, boundary)
    assert cap < len(body) <= host_request_body_limit(cap)
    with pytest.raises(UseDirectUpload):
        inline_body(str(len(body)), lambda: body, cap=cap)
    smaller = _multipart(b"d" * (cap // 2), boundary)
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    assert read_submission(headers, smaller).document == b"d" * (cap // 2)


def test_the_example_local_settings_derive_the_host_limit_from_their_cap() -> None:
    """functions/local.settings.example.json (Core Tools by hand, whose host reads the setting too)."""
    example = Path(__file__).resolve().parents[3] / "functions" / "local.settings.example.json"
    values = json.loads(example.read_text(encoding="utf-8"))["Values"]
    cap = Settings.from_env(values).max_inline_request_bytes
    assert values[HOST_REQUEST_LIMIT_SETTING] == str(host_request_body_limit(cap))


def test_the_local_hosts_default_limit_is_the_derivation_for_the_default_cap() -> None:
    """``python -m local.functions_host`` without --max-body-bytes takes what infra/ and the local stack
    configure for an unset cap, not the Functions default of 100 MB it used to copy."""
    from local.functions_host.http_server import DEFAULT_MAX_BODY_BYTES

    assert host_request_body_limit(Settings.from_env({}).max_inline_request_bytes) == DEFAULT_MAX_BODY_BYTES
    assert DEFAULT_MAX_BODY_BYTES < FUNCTIONS_REQUEST_LIMIT_BYTES
