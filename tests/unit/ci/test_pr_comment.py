"""The one preview comment per pull request (scripts/ci/pr_comment.py) against a local stand-in for
GitHub's issue-comments REST API, as strict as GitHub where the step depends on it: a bearer token and
a User-Agent are required (401 / 403 otherwise), bodies over 65,536 characters are refused (422),
listings are paginated (`per_page` at most 100, `Link: rel="next"`), and a comment can only be
PATCHed by its author."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scripts.ci import __main__ as steps
from scripts.ci.pr_comment import MARKER, CommentError, GitHub, StackPreview, read_previews, redact, render

TOKEN = "ghs_fake-installation-token"
BOT = {"login": "github-actions[bot]", "type": "Bot"}
REPO = "my-org/claim-check"
TENANT = "0fa1c6e2-1b7e-4a55-9d43-2b2f3c4d5e6f"
SUBSCRIPTION = "5ab0c0de-0000-4000-8000-00000000abcd"


@dataclass
class FakeGitHub:
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> comment on PR 7
    requests: list[tuple[str, str]] = field(default_factory=list)
    next_id: int = 100

    def add(self, body: str, user: dict[str, str]) -> int:
        self.next_id += 1
        self.comments[self.next_id] = {"id": self.next_id, "body": body, "user": user}
        return self.next_id


def _handler(github: FakeGitHub, base: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            github.requests.append((self.command, self.path))
            if not self.headers.get("User-Agent"):
                self._answer(403, {"message": "Request forbidden by administrative rules."})
            elif self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._answer(401, {"message": "Bad credentials"})
            else:
                return False
            return True

        def _body(self) -> dict[str, Any] | None:
            if self.headers.get("Content-Type") != "application/json":
                self._answer(415, {"message": "Unsupported Media Type"})
                return None
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if not isinstance(body.get("body"), str) or len(body["body"]) > 65_536:
                self._answer(422, {"message": "Validation Failed", "errors": [{"code": "custom"}]})
                return None
            return dict(body)

        def do_GET(self) -> None:
            if self._refused():
                return
            parts = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            if parts.path != f"/repos/{REPO}/issues/7/comments":
                self._answer(404, {"message": "Not Found"})
                return
            per_page, page = min(int(query.get("per_page", 30)), 100), int(query.get("page", 1))
            ordered = [github.comments[key] for key in sorted(github.comments)]
            chunk = ordered[(page - 1) * per_page : page * per_page]
            headers = {}
            if page * per_page < len(ordered):
                headers["Link"] = f'<{base[0]}{parts.path}?per_page={per_page}&page={page + 1}>; rel="next"'
            self._answer(200, chunk, headers)

        def do_POST(self) -> None:
            if self._refused():
                return
            if self.path != f"/repos/{REPO}/issues/7/comments":
                self._answer(404, {"message": "Not Found"})
                return
            body = self._body()
            if body is not None:
                comment_id = github.add(body["body"], BOT)
                self._answer(201, github.comments[comment_id])

        def do_PATCH(self) -> None:
            if self._refused():
                return
            match = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", self.path)
            comment = github.comments.get(int(match.group(1))) if match else None
            if comment is None:
                self._answer(404, {"message": "Not Found"})
                return
            if comment["user"] != BOT:
                self._answer(403, {"message": "Resource not accessible by integration"})
                return
            body = self._body()
            if body is not None:
                comment["body"] = body["body"]
                self._answer(200, comment)

    return Handler


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, str]]:
    fake, base = FakeGitHub(), [""]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake, base))
    base[0] = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake, base[0]
    server.shutdown()
    server.server_close()


def _previews(folder: Path, outputs: dict[str, tuple[int, str]]) -> Path:
    for stack, (code, text) in outputs.items():
        (folder / f"preview-{stack}").mkdir(parents=True)
        (folder / f"preview-{stack}" / "output.txt").write_text(text, encoding="utf-8")
        outcome = {"stack": stack, "exit_code": code, "failed_command": "pulumi preview" if code else ""}
        (folder / f"preview-{stack}" / "outcome.json").write_text(json.dumps(outcome), encoding="utf-8")
    return folder


def _comment_step(api: str, previews: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    for name, value in {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": api,
        "GITHUB_RUN_ID": "42",
        "ARM_TENANT_ID": TENANT,
        "ARM_SUBSCRIPTION_ID": SUBSCRIPTION,
    }.items():
        monkeypatch.setenv(name, value)
    return steps.main(["comment", "--pr", "7", "--previews", str(previews), "--job-result", "failure"])


def test_one_comment_per_pull_request_updated_in_place(
    github: tuple[FakeGitHub, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run creates the comment; the next push's run PATCHes the same one (found past the
    first page of 100), so the pull request holds exactly one, with both stacks in it."""
    fake, api = github
    for number in range(120):
        fake.add(f"review comment {number}", {"login": "someone", "type": "User"})
    first = _previews(tmp_path / "one", {"dev": (0, "+ 3 to create"), "prod": (255, "error: preview failed")})
    assert _comment_step(api, first, monkeypatch) == 0
    second = _previews(tmp_path / "two", {"dev": (0, "+ 4 to create"), "prod": (0, "no changes")})
    assert _comment_step(api, second, monkeypatch) == 0
    ours = [comment for comment in fake.comments.values() if comment["body"].startswith(MARKER)]
    assert len(ours) == 1
    assert "+ 4 to create" in ours[0]["body"]
    assert "Stack `prod`: passed" in ours[0]["body"]
    assert [method for method, _ in fake.requests].count("POST") == 1
    assert [method for method, _ in fake.requests].count("PATCH") == 1


def test_a_persons_comment_with_the_marker_is_not_taken_over(
    github: tuple[FakeGitHub, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone quoting the marker does not make their comment ours: a new bot comment is created."""
    fake, api = github
    fake.add(MARKER + " quoted by a reviewer", {"login": "someone", "type": "User"})
    assert _comment_step(api, _previews(tmp_path, {"dev": (0, "ok")}), monkeypatch) == 0
    assert [comment["user"]["type"] for comment in fake.comments.values()] == ["User", "Bot"]


def test_the_comment_holds_no_ids(
    github: tuple[FakeGitHub, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenant, subscription and principal ids (any GUID) and signed-URL signatures are taken out."""
    fake, api = github
    output = (
        f"~ roleAssignment principalId: 3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f\n"
        f"  scope: /subscriptions/{SUBSCRIPTION}/resourceGroups/rg-claimcheck-dev\n"
        f"  tenantId: {TENANT}\n"
        "Permalink: https://st.blob.core.windows.net/state/dev.json?se=2026&sig=SECRETSIG%3D&sp=r\n"
    )
    assert _comment_step(api, _previews(tmp_path, {"dev": (0, output)}), monkeypatch) == 0
    (comment,) = fake.comments.values()
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", comment["body"], re.IGNORECASE)
    assert "SECRETSIG" not in comment["body"]
    assert "/subscriptions/<id>/resourceGroups/rg-claimcheck-dev" in comment["body"]


def test_a_huge_preview_is_cut_to_fit_and_github_refusals_fail_the_step(
    github: tuple[FakeGitHub, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stacks of 100,000 characters each fit in one comment (GitHub refuses bodies over 65,536);
    a wrong token fails the step with GitHub's status, without the token."""
    fake, api = github
    big = _previews(tmp_path / "big", {"dev": (0, "x" * 100_000), "prod": (0, "y" * 100_000)})
    assert _comment_step(api, big, monkeypatch) == 0
    (comment,) = fake.comments.values()
    assert len(comment["body"]) <= 65_536
    assert "x" * 100 in comment["body"]
    assert "y" * 100 in comment["body"]
    with pytest.raises(CommentError, match="answered 401") as refused:
        GitHub(api, REPO, "wrong-token").upsert(7, "body")
    assert "wrong-token" not in str(refused.value)


def test_a_missing_stack_and_an_unread_preview_are_said(tmp_path: Path) -> None:
    """No artifacts (the jobs failed before the preview): the comment says so rather than nothing."""
    body = render(
        read_previews(tmp_path), job_result="failure", run_url="https://github.com/x/y/actions/runs/1"
    )
    assert body.startswith(MARKER)
    assert "No stack produced a preview" in body
    failed = render([StackPreview("prod", 255, "pulumi preview", "boom")], job_result="failure", run_url="u")
    assert "**failed** (`pulumi preview` exited 255)" in failed


def test_colour_escapes_do_not_reach_the_comment() -> None:
    body = render([StackPreview("dev", 0, "", "\x1b[32m+ create\x1b[0m")], job_result="success", run_url="u")
    assert "\x1b" not in body
    assert "+ create" in body


def test_redact_replaces_known_values_too() -> None:
    assert redact("client my-client-id and 1234", known=["my-client-id"]) == "client <id> and 1234"
