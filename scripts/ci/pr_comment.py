"""The pull request's one preview comment: found by a hidden marker and updated in place.

The preview jobs (one per stack) leave their output as artifacts; one comment job renders every stack
into a single body and upserts it through GitHub's REST API: the issue comments are listed page by page
(`Link: rel="next"`), the first one written by a bot whose body starts with MARKER is PATCHed, else one
is POSTed. Ids are taken out first: every GUID (tenant, subscription, principal, client, role
assignment ids) and the signature of any signed URL, so the comment can be read by anyone who can read
the pull request.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "<!-- claimcheck-preview -->"
API_VERSION = "2022-11-28"
# GitHub refuses a comment body over 65,536 characters (422); the stacks share what is left.
MAX_BODY = 65_536
_GUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_SIGNATURE = re.compile(r"([?&](?:sig|se|skoid|sktid)=)[^&\s\"']+", re.IGNORECASE)
REDACTED = "<id>"
_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # ANSI escapes, should the CLI colour its output
_TIMEOUT_SECONDS = 30.0


class CommentError(Exception):
    """GitHub refused a request; the message names the status, never the token."""


@dataclass(frozen=True)
class StackPreview:
    stack: str
    exit_code: int | None  # None: the job ended before `pulumi preview` ran
    failed_command: str
    output: str


def redact(text: str, known: Iterable[str] = ()) -> str:
    """`text` without GUIDs, signed-URL signatures or any of the `known` values."""
    for value in known:
        if value:
            text = text.replace(value, REDACTED)
    text = _SIGNATURE.sub(lambda match: match.group(1) + REDACTED, text)
    return _GUID.sub(REDACTED, text)


def read_previews(folder: Path) -> list[StackPreview]:
    """The preview artifacts under `folder` (one sub-folder per stack, as download-artifact leaves them)."""
    previews = []
    for outcome_file in sorted(folder.glob("*/outcome.json")):
        outcome = json.loads(outcome_file.read_text(encoding="utf-8"))
        output_file = outcome_file.with_name("output.txt")
        output = output_file.read_text(encoding="utf-8", errors="replace") if output_file.exists() else ""
        previews.append(
            StackPreview(
                str(outcome["stack"]), int(outcome["exit_code"]), str(outcome["failed_command"]), output
            )
        )
    return previews


def render(previews: list[StackPreview], *, job_result: str, run_url: str, known: Iterable[str] = ()) -> str:
    """The comment body: the marker, one section per stack (its verdict, the tail of its output)."""
    known = tuple(known)
    lines = [MARKER, f"### `pulumi preview` ([run]({run_url})): jobs {redact(job_result, known)}", ""]
    if not previews:
        lines.append("No stack produced a preview (the jobs ended before `pulumi preview` ran).")
    budget = (MAX_BODY - 2_000) // max(1, len(previews))
    for preview in previews:
        if preview.exit_code == 0:
            verdict = "passed"
        else:
            verdict = f"**failed** (`{preview.failed_command}` exited {preview.exit_code})"
        text = _COLOUR.sub("", redact(preview.output, known)).replace("```", "'''")
        if len(text) > budget:
            text = "[...]\n" + text[-budget:]
        lines += [f"#### Stack `{preview.stack}`: {verdict}", "", "```", text.rstrip("\n"), "```", ""]
    body = "\n".join(lines)
    assert len(body) <= MAX_BODY
    return body


@dataclass(frozen=True)
class GitHub:
    api: str  # GITHUB_API_URL, e.g. https://api.github.com
    repo: str  # owner/name
    token: str

    def request(
        self, method: str, url: str, body: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "claimcheck-ci",  # GitHub refuses a request without one
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
            raise CommentError("GITHUB_API_URL is not an http(s) URL")
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as answer:  # noqa: S310
                return json.loads(answer.read() or b"null"), {k.lower(): v for k, v in answer.headers.items()}
        except urllib.error.HTTPError as error:
            raise CommentError(
                f"{method} {urllib.parse.urlsplit(url).path}: GitHub answered {error.code}"
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise CommentError(f"cannot reach GitHub's API ({type(error).__name__})") from None

    def comments(self, number: int) -> Iterable[dict[str, Any]]:
        url: str | None = f"{self.api.rstrip('/')}/repos/{self.repo}/issues/{number}/comments?per_page=100"
        while url:
            page, headers = self.request("GET", url)
            yield from page if isinstance(page, list) else []
            url = _next_link(headers.get("link", ""))
            if url and urllib.parse.urlsplit(url)[:2] != urllib.parse.urlsplit(self.api)[:2]:
                raise CommentError("GitHub's next-page link leaves the API host; not followed")

    def upsert(self, number: int, body: str) -> tuple[str, int]:
        """("updated" | "created", comment id)."""
        for comment in self.comments(number):
            user = comment.get("user") or {}
            if str(comment.get("body", "")).startswith(MARKER) and user.get("type") == "Bot":
                url = f"{self.api.rstrip('/')}/repos/{self.repo}/issues/comments/{int(comment['id'])}"
                self.request("PATCH", url, {"body": body})
                return "updated", int(comment["id"])
        created, _ = self.request(
            "POST", f"{self.api.rstrip('/')}/repos/{self.repo}/issues/{number}/comments", {"body": body}
        )
        return "created", int(created["id"])


def _next_link(header: str) -> str | None:
    """The rel="next" URL of a Link header (RFC 8288, as GitHub paginates), if any."""
    for part in header.split(","):
        match = re.fullmatch(r'\s*<([^>]+)>\s*;\s*rel="next"\s*', part)
        if match:
            return match.group(1)
    return None
