"""The HTTP contract's request side: id and min_version rules, intake reading, the bounded multipart
reader, and Hypothesis fuzzing of that reader and of the envelope parser for crashes."""

from __future__ import annotations

import contextlib
import json
import logging

import pytest
import requests
from claimcheck.client import DIRECT_UPLOAD_THRESHOLD
from claimcheck.envelope import parse_envelope
from claimcheck.errors import InvalidEnvelope, UnsupportedSchemaVersion, UseDirectUpload
from claimcheck.http_api import (
    DOCUMENT_PART,
    FORM_FIELDS,
    MAX_FIELD_BYTES,
    MAX_MULTIPART_PARTS,
    MAX_PART_HEADER_BYTES,
    BadRequest,
    check_work_item_id,
    inline_body,
    none_match,
    parse_if_match,
    parse_min_version,
    read_multipart,
    read_submission,
    status_etag,
)
from claimcheck.settings import FUNCTIONS_REQUEST_LIMIT_BYTES, SETTING_NAMES, Settings, SettingsError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def _part(name: str, content: bytes, *extra_headers: str) -> bytes:
    headers = [f'Content-Disposition: form-data; name="{name}"', *extra_headers]
    return f"--{BOUNDARY}\r\n".encode() + "\r\n".join(headers).encode() + b"\r\n\r\n" + content + b"\r\n"


def _body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


@pytest.mark.parametrize("raw", ["²", "٣", "1²", "", " 1", "-1", "1.0", "0x10", "1" * 19])
def test_min_version_accepts_only_ascii_digits(raw: str) -> None:
    """'²' and '٣' pass str.isdigit() but are not versions; nor are signs, spaces or 19 digits."""
    with pytest.raises(BadRequest, match="min_version"):
        parse_min_version(raw)


def test_min_version_values() -> None:
    assert (parse_min_version(None), parse_min_version("0"), parse_min_version("42")) == (None, 0, 42)


@pytest.mark.parametrize("value", ["x" * 60_000, "", "a/b", "-lead", "ünïcode", "a" * 65])
def test_bad_work_item_ids_are_refused_with_intakes_words(value: str) -> None:
    """The status route's id check is intake's: same code, same message as the producer's refusal."""
    with pytest.raises(BadRequest) as refused:
        check_work_item_id(value)
    assert refused.value.code == "invalid_request"
    assert str(refused.value).startswith("work_item_id must be 1-64 characters")


def test_good_work_item_ids_pass() -> None:
    assert check_work_item_id("order:42") == "order:42"
    assert check_work_item_id("wi-" + "a" * 61) == "wi-" + "a" * 61


def test_intake_header_with_a_bad_work_item_id_is_refused_before_submit() -> None:
    with pytest.raises(BadRequest, match="work_item_id"):
        read_submission({"X-Work-Item-Id": "x" * 60_000}, b"text")


@pytest.mark.parametrize("header", ["X-Work-Item-Id", "X-Document-Type", "traceparent", "X-Correlation-Id"])
def test_an_empty_intake_header_is_refused_naming_it_not_read_as_absent(header: str) -> None:
    # Found by the API fuzz (negative mode): an empty header was read as absent, so an empty
    # X-Work-Item-Id made a new work item instead of being refused like the schema's pattern says.
    with pytest.raises(BadRequest, match=f"header {header.lower()} is empty") as refused:
        read_submission({header: " ", "X-Tenant-Id": "acme"}, b"text")
    assert refused.value.code == "invalid_request"
    assert "work_item_id" not in read_submission({"X-Tenant-Id": "acme"}, b"text").fields


def test_headers_and_raw_body() -> None:
    submission = read_submission(
        {"X-Tenant-Id": "acme", "Content-Type": "text/plain", "X-Review-Required": "yes"}, b"hello"
    )
    assert (submission.document, submission.content_type) == (b"hello", "text/plain")
    assert submission.fields == {
        "tenant_id": "acme",
        "purpose": "",
        "classification": "",
        "review_required": True,
    }


def test_multipart_as_requests_sends_it() -> None:
    """The document part keeps its bytes and type; known fields are read, unknown ones ignored."""
    prepared = requests.Request(
        "POST",
        "http://localhost/api/documents",
        files={"document": ("a.pdf", b"%PDF-1.4\r\n--not-a-boundary\r\n", "application/pdf")},
        data={
            "tenant_id": " acme ",
            "purpose": "contract-review",
            "classification": "internal",
            "other": "x",
        },
    ).prepare()
    assert isinstance(prepared.body, bytes)
    submission = read_submission(
        {name: str(value) for name, value in prepared.headers.items()}, prepared.body
    )
    assert submission.document == b"%PDF-1.4\r\n--not-a-boundary\r\n"
    assert submission.content_type == "application/pdf"
    assert submission.fields == {
        "tenant_id": "acme",
        "purpose": "contract-review",
        "classification": "internal",
    }


def test_multipart_part_without_content_type_is_text_plain() -> None:
    document, content_type, _ = read_multipart(MULTIPART, _body(_part(DOCUMENT_PART, b"abc")))
    assert (document, content_type) == (b"abc", "text/plain")


def test_sixty_thousand_tiny_parts_are_refused_at_the_part_limit() -> None:
    """The parser stops at the part limit: the cost is bounded by it, not by the number of parts sent."""
    body = _body(*(_part("x", b"y") for _ in range(60_000)))
    with pytest.raises(BadRequest, match="Maximum segment count exceeded"):
        read_multipart(MULTIPART, body)
    # Exactly at the limit is still fine.
    read_multipart(
        MULTIPART,
        _body(_part(DOCUMENT_PART, b"d"), *(_part("x", b"y") for _ in range(MAX_MULTIPART_PARTS - 1))),
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_body(_part(DOCUMENT_PART, b"d", "X-Long: " + "a" * MAX_PART_HEADER_BYTES)), "header length"),
        (_body(_part(DOCUMENT_PART, b"d", *(f"X-H{n}: v" for n in range(10)))), "header count"),
        (_body(_part(DOCUMENT_PART, b"d"), _part("tenant_id", b"t" * (MAX_FIELD_BYTES + 1))), "longer than"),
        (_body(_part(DOCUMENT_PART, b"d"), _part("tenant_id", b"\xff\xfe")), "not UTF-8"),
        (_body(_part("tenant_id", b"acme")), "no 'document' part"),
        (_part(DOCUMENT_PART, b"never closed"), "refused"),
        (b"", "refused"),
    ],
    ids=["long-header", "many-headers", "long-field", "binary-field", "no-document", "unterminated", "empty"],
)
def test_malformed_or_oversized_multipart_is_a_400(body: bytes, reason: str) -> None:
    with pytest.raises(BadRequest, match=reason):
        read_multipart(MULTIPART, body)


def test_multipart_without_boundary_is_a_400() -> None:
    with pytest.raises(BadRequest, match="boundary"):
        read_submission({"Content-Type": "multipart/form-data"}, b"--x--")


# --- fuzzing ---------------------------------------------------------------------------------------

_names = st.sampled_from([DOCUMENT_PART, *sorted(FORM_FIELDS), "other", ""])
_content = st.binary(max_size=64) | st.sampled_from([b"", b"\r\n", f"--{BOUNDARY}".encode(), b"\xff"])
_header = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=40).map(
    lambda text: f"X-F: {text}"
)
_parts = st.lists(
    st.builds(
        lambda name, content, headers: _part(name, content, *headers),
        _names,
        _content,
        st.lists(_header, max_size=10),
    ),
    max_size=MAX_MULTIPART_PARTS + 4,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_parts, st.integers(min_value=0), st.binary(max_size=16), st.booleans())
def test_fuzzed_multipart_is_read_or_refused_with_a_400(
    parts: list[bytes], cut: int, noise: bytes, terminate: bool
) -> None:
    """Well-formed, truncated or corrupted multipart bodies: a Submission or a BadRequest, nothing else."""
    body = _body(*parts) if terminate else b"".join(parts)
    position = cut % (len(body) + 1)
    body = body[:position] + noise + body[position:]
    with contextlib.suppress(BadRequest):
        submission = read_submission({"Content-Type": MULTIPART}, body)
        assert isinstance(submission.document, bytes)
        assert set(submission.fields) <= FORM_FIELDS


@settings(max_examples=200)
@given(st.text(max_size=80), st.binary(max_size=200))
def test_fuzzed_content_type_and_body_never_crash_intake_reading(content_type: str, body: bytes) -> None:
    with contextlib.suppress(BadRequest):
        read_submission({"Content-Type": "multipart/form-data; " + content_type}, body)


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=200_000), st.sampled_from([b"[", b'{"a":', b'[{"b":']))
def test_deeply_nested_envelopes_are_invalid_not_a_crash(depth: int, opener: bytes) -> None:
    """JSON nesting has no limit of its own: a deep body must still be an InvalidEnvelope."""
    with pytest.raises(InvalidEnvelope):
        parse_envelope(opener * depth)


@settings(max_examples=300)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
        max_leaves=30,
    )
)
def test_any_json_document_parses_or_is_a_typed_envelope_error(document: object) -> None:
    import json

    with contextlib.suppress(InvalidEnvelope, UnsupportedSchemaVersion):
        parse_envelope(json.dumps(document).encode())


@pytest.mark.parametrize(("raw", "version"), [("3", 3), ('"v3"', 3), ('W/"v12-0a1b"', 12), (None, None)])
def test_if_match_names_a_version_by_number_or_status_etag(raw: str | None, version: int | None) -> None:
    assert parse_if_match(raw) == version


@pytest.mark.parametrize("raw", ["*", "v3", '"3"', "", "³"])
def test_if_match_refuses_what_names_no_version(raw: str) -> None:
    with pytest.raises(BadRequest):
        parse_if_match(raw)


def test_if_none_match_matches_the_current_etag_only() -> None:
    etag = status_etag(2, b"{}")
    assert parse_if_match(etag) == 2
    assert none_match(f'"other", {etag}', etag)
    assert none_match(f"W/{etag}", etag)
    assert not none_match(status_etag(2, b"{ }"), etag)
    assert not none_match(None, etag)


# --- the inline cap of POST /documents -------------------------------------------------------------------


class _Body:
    """A body reader that records whether it was called (inline_body must not read an over-cap body)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.read = False

    def __call__(self) -> bytes:
        self.read = True
        return self.data


def test_a_declared_length_over_the_inline_cap_is_refused_without_reading_the_body() -> None:
    body = _Body(b"x" * 11)
    with pytest.raises(UseDirectUpload) as refused:
        inline_body("11", body, cap=10)
    assert not body.read
    assert (refused.value.code, refused.value.http_status) == ("use_direct_upload", 413)
    assert "up to 10 bytes" in str(refused.value)
    assert "POST /api/uploads" in str(refused.value)


def test_a_body_at_the_inline_cap_is_read() -> None:
    assert inline_body("10", _Body(b"x" * 10), cap=10) == b"x" * 10
    assert inline_body(None, _Body(b"x" * 10), cap=10) == b"x" * 10


def test_a_body_without_content_length_is_refused_once_read_if_over_the_cap() -> None:
    """A chunked body (no Content-Length): the host read it within its own limit; over the cap it is
    refused all the same, so the cap holds whatever the transfer encoding."""
    with pytest.raises(UseDirectUpload, match="this one has 11"):
        inline_body(None, _Body(b"x" * 11), cap=10)


@pytest.mark.parametrize("declared", ["", "-1", "+5", "1_0", "ten", "1" * 20])
def test_a_malformed_content_length_is_a_400(declared: str) -> None:
    with pytest.raises(BadRequest, match="Content-Length"):
        inline_body(declared, _Body(b""), cap=10)


def test_the_inline_cap_is_the_clients_threshold_and_a_setting_named_when_refused() -> None:
    """One number: the client switches to the direct upload exactly where the API's default cap ends."""
    name = SETTING_NAMES["max_inline_request_bytes"]
    assert Settings.from_env({}).max_inline_request_bytes == DIRECT_UPLOAD_THRESHOLD
    assert Settings.from_env({name: "1024"}).max_inline_request_bytes == 1024
    for bad in ("0", "lots", str(FUNCTIONS_REQUEST_LIMIT_BYTES + 1)):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({name: bad})


def test_an_intake_outage_is_a_503_body_and_a_log_line_of_type_names_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from claimcheck.errors import StorageUnavailable
    from claimcheck.http_api import Unavailable

    class ServiceRequestError(Exception):  # named like azure-core's, text quoting a signed URL
        pass

    try:
        try:
            raise ServiceRequestError("GET https://acct.blob.core.windows.net/payloads/x?sig=SECRET failed")
        except ServiceRequestError as sdk:
            raise StorageUnavailable("upload: storage did not answer (ServiceRequestError)") from sdk
    except StorageUnavailable as error:
        outage = error
    log = logging.getLogger("test.http_api")
    with caplog.at_level(logging.INFO, logger="test.http_api"):
        body = Unavailable.answer("intake", outage, log)
        assert Unavailable.answer("intake", ValueError("a bug"), log) is None
    assert body is not None
    assert body["error"] == "unavailable"
    assert Unavailable.status == 503
    assert int(Unavailable.headers["Retry-After"]) >= 1
    assert caplog.messages == ["intake unavailable: StorageUnavailable from ServiceRequestError"]
    assert "SECRET" not in json.dumps(body)
