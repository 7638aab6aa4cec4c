"""`claimcheck-ops deploy` against a local HTTP server standing in for Azure Resource Manager and the
app's SCM (OneDeploy) endpoint: what goes over the wire, when it uploads, how it retries and fails.

The stand-in refuses what the real endpoints refuse where the command depends on it: no bearer token
(401), a publish that is not `Content-Type: application/zip` (415) or not a zip (400), an unknown
deployment id (404), and `/api/deployments/latest` is 404 until a deployment exists. Its publish
answers as Flex does (202 with the id), or as a synchronous OneDeploy does (200, no id, the deployment
already recorded), or 200/202 without an id and nothing recorded."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scripts import ops_release
from scripts.ops import app
from scripts.ops_deploy import PACKAGE_HASH_TAG, DeployTarget, RetryPolicy, deploy_package, function_key
from scripts.ops_errors import OpsError

TOKEN = "eyJ0eXAiOiJKV1QifQ.test-token-never-printed.c2lnbmF0dXJl"
APP_ID = "/subscriptions/s1/resourceGroups/rg-claimcheck-dev/providers/Microsoft.Web/sites/app-1"
FUNCTION_KEY = "fake-function-key-never-printed"
FAST = RetryPolicy(attempts=3, base_delay_s=0.0, max_delay_s=0.0, request_timeout_s=10.0)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeAzure:
    """ARM site record + tags API, and the SCM publish/deployments API, scripted per test."""

    tags: dict[str, str] = field(default_factory=dict)
    sku: str = "FlexConsumption"
    publish_answers: list[int] = field(default_factory=list)  # statuses before the final answer
    # async: 202 with the id; sync: 200, no id, recorded; unrecorded: the given status, no id, nothing
    publish_mode: str = "async"
    unrecorded_status: int = 200
    statuses: list[int] = field(default_factory=lambda: [1, 2, 4])
    status_text: str = ""
    seen: list[Seen] = field(default_factory=list)
    scm_host: str = ""
    deployments: list[str] = field(default_factory=list)  # ids, oldest first
    accepts: Callable[[str], bool] = lambda token: token == TOKEN

    def requests(self, method: str, prefix: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path.startswith(prefix)]


def _handler(fake: FakeAzure) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _record(self) -> Seen:
            length = int(self.headers.get("Content-Length") or 0)
            seen = Seen(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                self.rfile.read(length),
            )
            fake.seen.append(seen)
            return seen

        def _authorized(self) -> bool:
            header = self.headers.get("Authorization", "")
            if not (header.startswith("Bearer ") and fake.accepts(header.removeprefix("Bearer "))):
                self._answer(401, {"error": {"message": "no valid bearer token"}})
                return False
            return True

        def do_GET(self) -> None:
            self._record()
            if not self._authorized():
                return
            if self.path.startswith(APP_ID + "?"):
                self._answer(
                    200,
                    {
                        "id": APP_ID,
                        "tags": dict(fake.tags),
                        "properties": {
                            "sku": fake.sku,
                            "hostNameSslStates": [
                                {"name": "app-1.azurewebsites.net", "hostType": "Standard"},
                                {"name": fake.scm_host, "hostType": "Repository"},
                            ],
                        },
                    },
                )
            elif self.path == "/api/deployments/latest":
                if fake.deployments:
                    self._deployment(fake.deployments[-1], advance=False)
                else:
                    self._answer(404, {"Message": "no deployment"})
            elif self.path.startswith("/api/deployments/") and self.path.split("/")[-1] in fake.deployments:
                self._deployment(self.path.split("/")[-1], advance=True)
            else:
                self._answer(404, {"error": {"message": "not found"}})

        def _deployment(self, deployment_id: str, *, advance: bool) -> None:
            if advance:
                status = fake.statuses.pop(0) if len(fake.statuses) > 1 else fake.statuses[0]
            else:
                status = fake.statuses[0]
            self._answer(
                200,
                {
                    "id": deployment_id,
                    "status": status,
                    "status_text": fake.status_text,
                    "complete": status not in (0, 1, 2),
                },
            )

        def do_POST(self) -> None:
            seen = self._record()
            if not self._authorized():
                return
            if self.path.startswith(APP_ID + "/host/default/listKeys?"):
                self._answer(200, {"masterKey": "m", "functionKeys": {"default": FUNCTION_KEY}})
                return
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            if not self.path.startswith("/api/publish?") or query.get("RemoteBuild", "").lower() not in (
                "true",
                "false",
            ):
                self._answer(404, {"Message": "not found"})
            elif fake.publish_answers:
                status = fake.publish_answers.pop(0)
                self._answer(status, {"Message": f"scripted {status}"})
            elif seen.headers.get("content-type") != "application/zip":
                self._answer(415, {"Message": "Content-Type must be application/zip"})
            elif not seen.body.startswith(b"PK"):
                self._answer(400, {"Message": "the body is not a zip archive"})
            elif fake.publish_mode == "unrecorded":
                self._empty(fake.unrecorded_status)
            else:
                fake.deployments.append(f"dep-{len(fake.deployments) + 1}")
                if fake.publish_mode == "sync":
                    self._empty(200)
                else:
                    self._answer(202, fake.deployments[-1])

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_PATCH(self) -> None:
            seen = self._record()
            if not self._authorized():
                return
            fake.tags.update(json.loads(seen.body)["properties"]["tags"])
            self._answer(200, {"properties": {"tags": fake.tags}})

    return Handler


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    azure = FakeAzure()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(azure))
    azure.scm_host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield azure
    server.shutdown()
    server.server_close()


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = tmp_path / "claimcheck-functions.zip"
    path.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    return path


def _target(fake: FakeAzure) -> DeployTarget:
    base = f"http://{fake.scm_host}"
    return DeployTarget(app_id=APP_ID, arm_endpoint=base, scm_url=base)


def _deploy(fake: FakeAzure, package: Path, **options: Any) -> Any:
    lines: list[str] = []
    scopes: list[str] = []

    def token(scope: str) -> str:
        scopes.append(scope)
        return TOKEN

    result = deploy_package(
        package,
        _target(fake),
        token,
        retry=FAST,
        sleep=lambda _: None,
        poll_interval_s=0.01,
        progress=lines.append,
        **options,
    )
    assert scopes == ["https://management.azure.com/.default"]
    assert not [line for line in lines if TOKEN in line]
    return result


def test_upload_request_is_a_onedeploy_zip_post_with_a_bearer_token(fake: FakeAzure, package: Path) -> None:
    """POST /api/publish?RemoteBuild=true, application/zip, the zip's bytes, Bearer token; then the
    deployment is polled to success and the hash recorded in the app's tag."""
    result = _deploy(fake, package)
    (publish,) = fake.requests("POST", "/api/publish")
    assert publish.path == "/api/publish?RemoteBuild=true&Deployer=claimcheck-ops"
    assert publish.headers["content-type"] == "application/zip"
    assert publish.headers["authorization"] == f"Bearer {TOKEN}"
    assert publish.body == package.read_bytes()
    assert len(fake.requests("GET", "/api/deployments/dep-")) == 3
    digest = hashlib.sha256(package.read_bytes()).hexdigest()
    (patch,) = fake.requests("PATCH", APP_ID)
    assert patch.path == f"{APP_ID}/providers/Microsoft.Resources/tags/default?api-version=2021-04-01"
    assert json.loads(patch.body) == {
        "operation": "Merge",
        "properties": {"tags": {PACKAGE_HASH_TAG: digest}},
    }
    assert all(seen.headers["authorization"] == f"Bearer {TOKEN}" for seen in fake.seen)
    assert (result.uploaded, result.status, result.sha256) == (True, "success", digest)


def test_same_hash_uploads_nothing_and_a_changed_package_uploads(fake: FakeAzure, package: Path) -> None:
    """A second run with the deployed hash only reads the app; --force or a new package uploads again."""
    _deploy(fake, package)
    fake.seen.clear()
    assert _deploy(fake, package).uploaded is False
    assert [seen.method for seen in fake.seen] == ["GET"]
    fake.statuses = [4]
    assert _deploy(fake, package, force=True).uploaded is True
    package.write_bytes(package.read_bytes() + b"\0")
    fake.seen.clear()
    assert _deploy(fake, package).uploaded is True
    assert len(fake.requests("POST", "/api/publish")) == 1


@pytest.mark.parametrize("transient", [409, 429, 500, 503])
def test_transient_answers_are_retried_within_the_budget(
    fake: FakeAzure, package: Path, transient: int
) -> None:
    """409 (a deployment in progress), 429 and 5xx are retried; the upload then succeeds."""
    fake.publish_answers = [transient, transient]
    assert _deploy(fake, package).uploaded is True
    assert len(fake.requests("POST", "/api/publish")) == 3


def test_retries_are_bounded(fake: FakeAzure, package: Path) -> None:
    """Persistent 503s stop after the policy's attempts with the status named; no tag is written."""
    fake.publish_answers = [503] * 10
    with pytest.raises(OpsError, match=r"HTTP 503.*after 3 attempts"):
        _deploy(fake, package)
    assert len(fake.requests("POST", "/api/publish")) == 3
    assert not fake.requests("PATCH", APP_ID)


@pytest.mark.parametrize(
    ("status", "says"), [(401, "401 Unauthorized"), (403, "403 Forbidden"), (404, "404 Not Found")]
)
def test_auth_and_missing_app_fail_at_once(fake: FakeAzure, package: Path, status: int, says: str) -> None:
    """401/403/404 are not retried; the message says what to check and never holds the token."""
    fake.publish_answers = [status]
    with pytest.raises(OpsError) as raised:
        _deploy(fake, package)
    assert says in str(raised.value)
    assert TOKEN not in str(raised.value)
    assert len(fake.requests("POST", "/api/publish")) == 1


def test_failed_build_is_reported_and_leaves_the_hash_unrecorded(fake: FakeAzure, package: Path) -> None:
    """Status 3 (failed) ends the wait with the platform's text; the next run will upload again."""
    fake.statuses, fake.status_text = [1, 3], "pip install failed: no matching distribution"
    with pytest.raises(OpsError, match="deployment failed: pip install failed"):
        _deploy(fake, package)
    assert not fake.requests("PATCH", APP_ID)
    assert PACKAGE_HASH_TAG not in fake.tags


def test_wait_is_bounded(fake: FakeAzure, package: Path) -> None:
    """A deployment that never finishes ends in a timeout error after timeout/interval polls."""
    fake.statuses = [1]
    with pytest.raises(OpsError, match="did not finish within 1 s"):
        _deploy(fake, package, timeout_s=1.0)
    assert len(fake.requests("GET", "/api/deployments/dep-")) <= 101


def test_other_plans_are_refused_before_upload(fake: FakeAzure, package: Path) -> None:
    """An app that is not on Flex Consumption is refused before anything is uploaded."""
    fake.sku = "Dynamic"
    with pytest.raises(OpsError, match="Dynamic plan"):
        _deploy(fake, package)
    assert not fake.requests("POST", "/api/publish")


def test_cli_prints_one_error_line_and_never_the_token(
    fake: FakeAzure, package: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the CLI: success and failure output (stdout, stderr, logs) never hold the token; a 403
    is one `error:` line and exit code 1."""
    monkeypatch.setattr(ops_release, "azure_token", lambda scope: TOKEN)
    fake.statuses = [4]  # no poll interval to sit out
    base = f"http://{fake.scm_host}"
    args = [
        "deploy",
        "--app-id",
        APP_ID,
        "--package",
        str(package),
        "--arm-endpoint",
        base,
        "--scm-url",
        base,
    ]
    runner = CliRunner()
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert "deployed claimcheck-functions.zip" in ok.stdout
    fake.publish_answers = [403]
    failed = runner.invoke(app, [*args, "--force"])
    assert failed.exit_code == 1
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "403 Forbidden" in errors[0]
    for text in (ok.stdout, ok.stderr, failed.stdout, failed.stderr, caplog.text):
        assert TOKEN not in text


def test_a_synchronous_200_is_followed_to_the_deployment_it_recorded(fake: FakeAzure, package: Path) -> None:
    """OneDeploy without async answers 200 and no id once done: the command takes the deployment
    /api/deployments/latest names (a new one), checks its status and only then records the hash."""
    fake.deployments, fake.publish_mode, fake.statuses = ["dep-old"], "sync", [4]
    result = _deploy(fake, package)
    assert (result.deployment_id, result.status) == ("dep-2", "success")
    assert fake.requests("GET", "/api/deployments/dep-2")
    assert PACKAGE_HASH_TAG in fake.tags


@pytest.mark.parametrize("status", [200, 202])
def test_an_answer_without_an_id_and_no_new_deployment_fails(
    fake: FakeAzure, package: Path, status: int
) -> None:
    """200 or 202 without an id while the latest deployment is still the one before the upload (or
    there is none): not a success; the hash is not recorded, so the next run uploads again."""
    fake.deployments, fake.publish_mode, fake.unrecorded_status = ["dep-old"], "unrecorded", status
    with pytest.raises(OpsError, match=f"answered {status} without a deployment id and the app lists no new"):
        _deploy(fake, package)
    fake.deployments = []
    with pytest.raises(OpsError, match="lists no new deployment"):
        _deploy(fake, package)
    assert PACKAGE_HASH_TAG not in fake.tags


def test_the_stand_in_refuses_what_onedeploy_refuses(fake: FakeAzure, package: Path) -> None:
    """A token the endpoints do not accept is a 401 named at once; a body that is not a zip is 400."""
    with pytest.raises(OpsError, match="401 Unauthorized"):
        deploy_package(
            package, _target(fake), lambda scope: "not-the-token", retry=FAST, sleep=lambda _: None
        )
    package.write_bytes(b"not a zip")
    with pytest.raises(OpsError, match=r"HTTP 400.*not a zip"):
        _deploy(fake, package)


def test_the_function_key_comes_from_arm_list_keys(fake: FakeAzure) -> None:
    """POST <app id>/host/default/listKeys with the command's ARM token (no Azure CLI): the default
    function key, which no progress line or error carries."""
    target = DeployTarget(app_id=APP_ID, arm_endpoint=f"http://{fake.scm_host}")
    assert function_key(target, lambda scope: TOKEN, retry=FAST) == FUNCTION_KEY
    (listed,) = fake.requests("POST", APP_ID)
    assert listed.path == f"{APP_ID}/host/default/listKeys?api-version=2024-04-01"
    with pytest.raises(OpsError, match="401") as refused:
        function_key(target, lambda scope: "wrong", retry=FAST)
    assert FUNCTION_KEY not in str(refused.value)
