"""The workflows' Pulumi steps, run the way the runner runs them, with the stand-in `pulumi` on PATH.

Each `run:` step is written to a file and started with the shell GitHub uses for it: `bash -e {0}`
when the step names no shell, `bash --noprofile --norc -eo pipefail {0}` for `shell: bash` (GitHub's
workflow syntax reference, "defaults.run.shell"). So a step whose status hides pulumi's (a pipe into
`tee` without pipefail, as preview.yml had) fails these tests.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.ci.conftest import REPO_ROOT, FakeCli

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
# GitHub's shell templates for ubuntu runners.
SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


def _step(workflow: str, name: str) -> dict[str, Any]:
    document = yaml.safe_load((WORKFLOWS / workflow).read_text(encoding="utf-8"))
    for job in document["jobs"].values():
        for step in job.get("steps", []):
            if step.get("name") == name:
                return dict(step)
    raise AssertionError(f"{workflow} has no step {name!r}")


def _workspace(tmp_path: Path) -> Path:
    """The job's working directory: the checkout's infra/ (the policy pack), files written apart."""
    workspace = tmp_path / "workspace"
    if not workspace.exists():
        workspace.mkdir()
        (workspace / "infra").symlink_to(REPO_ROOT / "infra")
    return workspace


def _run_step(step: dict[str, Any], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "step.sh"
    script.write_text(str(step["run"]), encoding="utf-8")
    return subprocess.run(
        [*SHELLS[step.get("shell")], str(script)],
        cwd=_workspace(tmp_path),
        env=env
        | {key: str(value) for key, value in (step.get("env") or {}).items() if "${{" not in str(value)},
        capture_output=True,
        text=True,
        timeout=120,
    )


INSTALL = "Install the program's dependencies"
PREVIEW = ("preview.yml", "Preview")
UP = ("deploy-stack.yml", "Update the infrastructure")


@pytest.mark.parametrize("where", [PREVIEW, UP], ids=["preview", "up"])
@pytest.mark.parametrize(
    "scenario",
    [{"exit": 255, "output": "error: an azure-native error"}, {"violation": True}],
    ids=["pulumi-fails", "mandatory-policy-violation"],
)
def test_a_failing_pulumi_run_fails_the_step(
    fake_cli: FakeCli, tmp_path: Path, where: tuple[str, str], scenario: dict[str, Any]
) -> None:
    """A failed preview/up, or one whose policy pack reports a mandatory violation (the CLI's exit
    255), fails the workflow step with pulumi's exit code."""
    workflow, name = where
    command = "preview" if workflow == "preview.yml" else "up"
    env = fake_cli.env({command: scenario}, STACK="dev")
    assert _run_step(_step(workflow, INSTALL), env, tmp_path).returncode == 0
    result = _run_step(_step(workflow, name), env, tmp_path)
    assert result.returncode == 255, result.stdout + result.stderr
    assert [call[0] for call in fake_cli.calls()] == ["install", "install", "login", command]


def test_a_passing_preview_passes_and_keeps_its_output(fake_cli: FakeCli, tmp_path: Path) -> None:
    """login and preview: exit 0, the output (ids redacted) and the outcome kept
    for the comment job, and the exact preview command line (policy pack, no permalink)."""
    output = "+ 42 to create\n  principalId: 3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
    env = fake_cli.env({"preview": {"output": output}}, STACK="prod", ARM_CLIENT_ID="not-a-guid-client")
    result = _run_step(_step(*PREVIEW), env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert fake_cli.calls()[-1] == [
        "preview", "--stack", "prod", "--diff", "--policy-pack", "infra/policy",
        "--non-interactive", "--suppress-permalink",
    ]  # fmt: skip
    out = _workspace(tmp_path) / "preview"
    kept = (out / "output.txt").read_text(encoding="utf-8")
    assert "+ 42 to create" in kept
    assert "principalId: <id>" in kept  # the artifact, downloadable by PR readers, holds no ids
    assert "3c1d2e4f" not in kept
    assert "3c1d2e4f" in result.stdout  # the job log is pulumi's own output
    assert json.loads((out / "outcome.json").read_text(encoding="utf-8")) == {
        "stack": "prod",
        "exit_code": 0,
        "failed_command": "",
    }


def test_a_failed_setup_stops_before_the_preview(fake_cli: FakeCli, tmp_path: Path) -> None:
    """A Pulumi Cloud backend in a pull request (no token there) fails before anything runs, naming
    the variable; a failing `pulumi install` fails its step with its exit code, and a failing
    `pulumi login` stops the preview step before the preview."""
    cloud = fake_cli.env(STACK="dev", PULUMI_BACKEND_URL="https://api.pulumi.com")
    refused = _run_step(_step(*PREVIEW), cloud, tmp_path)
    assert refused.returncode == 2
    assert "PULUMI_BACKEND_URL" in refused.stderr
    assert fake_cli.calls() == []
    broken = _run_step(_step("preview.yml", INSTALL), fake_cli.env({"install": {"exit": 3}}), tmp_path)
    assert broken.returncode == 3
    assert [call[0] for call in fake_cli.calls()] == ["install"]
    no_account = fake_cli.env(STACK="dev", PULUMI_BACKEND_URL="azblob://state")
    assert _run_step(_step(*PREVIEW), no_account, tmp_path).returncode == 255
    assert [call[0] for call in fake_cli.calls()] == ["install", "login"]


def test_every_run_step_says_shell_bash() -> None:
    """No `run:` step relies on the default shell (bash -e, no pipefail)."""
    for path in sorted(WORKFLOWS.glob("*.yml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job in document["jobs"].values():
            for step in job.get("steps", []):
                if "run" in step:
                    assert step.get("shell") == "bash", f"{path.name}: {step.get('name')}"


@pytest.mark.parametrize(
    ("name", "missing"),
    [("Package and deploy the code", "functionAppId"), ("Smoke test", "functionAppHostName")],
)
def test_a_stack_without_its_outputs_fails_the_step_naming_the_output(
    fake_cli: FakeCli, tmp_path: Path, name: str, missing: str
) -> None:
    """deploy and smoke read the stack's outputs first; one that is missing (an `up` that did not
    complete) fails the step with exit 2 and the output's name, before anything is installed or sent."""
    (fake_cli.home / "credentials.json").write_text('{"current": "azblob://state"}', encoding="utf-8")
    env = fake_cli.env({"outputs": {"apiAudience": "api://claimcheck-dev"}}, STACK="dev")
    result = _run_step(_step("deploy-stack.yml", name), env, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"stack dev has no output {missing!r}" in result.stderr
    assert fake_cli.calls() == [["stack", "output", "--stack", "dev", "--json"]]


def test_the_smoke_step_in_a_job_refuses_an_empty_smoke_client_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workflow sets CLAIMCHECK_API_CLIENT_ID from vars.AZURE_SMOKE_CLIENT_ID, which is "" when the
    variable was never set: the step names it (exit 2) instead of calling the API as the deploy
    identity and failing with a 403."""
    from scripts.ci import __main__ as steps
    from scripts.ci import pulumi_steps

    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "https://runner.invalid/token")
    monkeypatch.setenv("CLAIMCHECK_API_CLIENT_ID", "")
    monkeypatch.setattr(pulumi_steps, "stack_outputs", lambda stack: {})
    monkeypatch.setattr(pulumi_steps, "run", lambda command: pytest.fail("nothing may run"))
    assert steps.main(["smoke", "--stack", "dev"]) == 2
    assert "AZURE_SMOKE_CLIENT_ID" in capsys.readouterr().err
