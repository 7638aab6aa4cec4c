"""The deploy job's `python -m scripts.ci deploy` step, whole, as the runner runs it: the stand-in
`pulumi` answers the stack outputs, pip and `make package` really run, and `claimcheck-ops deploy`
uploads to the ARM/OneDeploy stand-in (test_deploy_contract.py) with an ARM token that the Entra
stand-in issued for a fresh GitHub OIDC assertion from the runner stand-in (tests/unit/ci/), long
after the assertion azure/login would have used had expired. No Azure CLI is on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from scripts.ops_deploy import PACKAGE_HASH_TAG
from tests.integration.ops.test_deploy_contract import APP_ID, FakeAzure, _handler
from tests.unit.ci.conftest import REPO_ROOT, make_fake_cli
from tests.unit.ci.identity_stand_ins import stand_ins


def _workspace(tmp_path: Path) -> Path:
    """The job's checkout: this repository's files, but an empty requirements-ops.txt (everything is
    installed already in this interpreter; pip still runs) and the package written under the
    workspace."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for name in ("Makefile", "functions", "pyproject.toml"):
        (workspace / name).symlink_to(REPO_ROOT / name)
    # A copy: scripts/package.py writes dist/ next to its own folder, which must be the workspace's.
    shutil.copytree(
        REPO_ROOT / "scripts", workspace / "scripts", ignore=shutil.ignore_patterns("__pycache__")
    )
    (workspace / "requirements-ops.txt").write_text("", encoding="utf-8")
    return workspace


def test_the_deploy_step_deploys_with_a_fresh_assertion(tmp_path: Path) -> None:
    cli = make_fake_cli(tmp_path)
    # The `up` step before it logged in to the state backend (the stand-in keeps that, as the CLI does).
    (cli.home / "credentials.json").write_text('{"current": "azblob://state"}', encoding="utf-8")
    fake = FakeAzure(statuses=[4])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.scm_host = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with stand_ins(tmp_path) as (runner, entra, ca_file):
            fake.accepts = lambda token: entra.tokens.get(token) == "https://management.azure.com/.default"
            runner.clock.advance(3600)  # an hour after the job started: azure/login's assertion is long dead
            env = cli.env(
                {"outputs": {"functionAppId": APP_ID}},
                ACTIONS_ID_TOKEN_REQUEST_URL=runner.url,
                ACTIONS_ID_TOKEN_REQUEST_TOKEN=runner.request_token,
                ARM_CLIENT_ID=entra.client_id,
                ARM_TENANT_ID=entra.tenant,
                AZURE_AUTHORITY_HOST=entra.authority,
                REQUESTS_CA_BUNDLE=str(ca_file),
                CLAIMCHECK_ARM_ENDPOINT=f"http://{fake.scm_host}",
                CLAIMCHECK_SCM_URL=f"http://{fake.scm_host}",
                PIP_NO_INDEX="1",
            )
            result = subprocess.run(
                [
                    "bash",
                    "--noprofile",
                    "--norc",
                    "-eo",
                    "pipefail",
                    "-c",
                    'python -m scripts.ci deploy --stack "$STACK"',
                ],
                cwd=_workspace(tmp_path),
                env=env | {"STACK": "dev", "TMPDIR": os.environ.get("TMPDIR", "/tmp")},
                capture_output=True,
                text=True,
                timeout=300,
            )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deployed claimcheck-functions.zip" in result.stdout
    assert cli.calls() == [["stack", "output", "--stack", "dev", "--json"]]
    assert runner.issued == 1
    assert entra.refusals == []
    (publish,) = fake.requests("POST", "/api/publish")
    assert publish.body.startswith(b"PK")
    assert PACKAGE_HASH_TAG in fake.tags
    for token in entra.tokens:
        assert token not in result.stdout + result.stderr
