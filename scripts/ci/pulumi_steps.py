"""The Pulumi steps of the workflows: the commands they run, and an exit status that is Pulumi's own.

Every command's output is streamed to the job log and, for the preview, also to a file for the
pull-request comment, without a shell pipeline: the step's exit status is the first failing command's,
never `tee`'s. A failed `pulumi preview` or `pulumi up` exits non-zero, and so does one whose policy
pack reported a mandatory violation: the engine turns it into an error after the run (pulumi-policy's
README: "mandatory, which results in an error after pulumi preview or pulumi up completes").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from scripts.ci.pr_comment import redact

POLICY_PACK = "infra/policy"
BACKEND_VARIABLE = "PULUMI_BACKEND_URL"
# A pull request's job gets no Pulumi Cloud token (its code would run with it): previews read the
# state from the Azure Blob backend with the preview identity's read-only role (docs/deploy.md).
PREVIEW_BACKEND_SCHEME = "azblob://"


# Values no preview artifact or comment shows, beside every GUID.
ID_VARIABLES = ("ARM_TENANT_ID", "ARM_SUBSCRIPTION_ID", "ARM_CLIENT_ID")


class StepError(Exception):
    """A step cannot start (a missing variable or output); the message names what to set."""


def backend_url(environ: Mapping[str, str]) -> str:
    url = environ.get(BACKEND_VARIABLE, "").strip()
    if not url:
        raise StepError(f"{BACKEND_VARIABLE} is not set (a repository variable; docs/deploy.md section 3)")
    return url


def install_commands() -> list[list[str]]:
    """The program's and the policy pack's dependencies. No Azure sign-in needed, so the workflows run
    this before azure/login: the Azure CLI's one-time assertion is then minutes fresher when the state
    backend and the Key Vault secrets provider first ask the CLI for their tokens."""
    return [["pulumi", "install"], ["pulumi", "install", "--cwd", POLICY_PACK]]


def login_command(backend: str) -> list[str]:
    return ["pulumi", "login", backend]


def preview_command(stack: str) -> list[str]:
    # --suppress-permalink: on a blob backend the permalink is a signed URL of the state file.
    return [
        "pulumi", "preview", "--stack", stack, "--diff", "--policy-pack", POLICY_PACK,
        "--non-interactive", "--suppress-permalink",
    ]  # fmt: skip


def up_command(stack: str) -> list[str]:
    return [
        "pulumi", "up", "--stack", stack, "--yes", "--diff", "--policy-pack", POLICY_PACK,
        "--non-interactive", "--suppress-permalink",
    ]  # fmt: skip


def outputs_command(stack: str) -> list[str]:
    return ["pulumi", "stack", "output", "--stack", stack, "--json"]


def run(command: Sequence[str], log: IO[str] | None = None, known: Sequence[str] = ()) -> int:
    """Runs `command`, its stdout and stderr interleaved into ours and, with ids redacted (`known`
    values and every GUID, scripts/ci/pr_comment.py), into `log`; its exit code."""
    print(f"$ {' '.join(command)}", flush=True)
    if log is not None:
        log.write(redact(f"$ {' '.join(command)}\n", known))
    try:
        process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except FileNotFoundError:
        message = f"{command[0]}: not found on PATH\n"
        sys.stdout.write(message)
        if log is not None:
            log.write(message)
        return 127
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        if log is not None:
            log.write(redact(line, known))
    sys.stdout.flush()
    return process.wait()


def run_all(
    commands: Sequence[Sequence[str]], log: IO[str] | None = None, known: Sequence[str] = ()
) -> tuple[int, str]:
    """Runs the commands in order up to the first failure: (its exit code, the command), or (0, "")."""
    for command in commands:
        code = run(command, log, known)
        if code != 0:
            return code, " ".join(command[:2])
    return 0, ""


def preview(stack: str, out_dir: Path, environ: Mapping[str, str] = os.environ) -> int:
    """`pulumi login` and `pulumi preview`; writes out_dir/output.txt and out_dir/outcome.json for the
    comment job."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "output.txt").open("w", encoding="utf-8") as log:
        try:
            backend = backend_url(environ)
            if not backend.startswith(PREVIEW_BACKEND_SCHEME):
                raise StepError(
                    f"pull-request previews need an Azure Blob state backend ({BACKEND_VARIABLE}="
                    "azblob://...): a pull request's job gets no Pulumi Cloud token"
                )
        except StepError as error:
            log.write(f"error: {error}\n")
            _write_outcome(out_dir, stack, 2, "configuration")
            raise
        # The file becomes an artifact anyone who can read the pull request can download: no ids.
        known = [environ.get(name, "") for name in ID_VARIABLES]
        code, failed = run_all([login_command(backend), preview_command(stack)], log, known)
    _write_outcome(out_dir, stack, code, failed)
    return code


def _write_outcome(out_dir: Path, stack: str, code: int, failed: str) -> None:
    outcome = {"stack": stack, "exit_code": code, "failed_command": failed}
    (out_dir / "outcome.json").write_text(json.dumps(outcome), encoding="utf-8")


def install() -> int:
    return run_all(install_commands())[0]


def up(stack: str, environ: Mapping[str, str] = os.environ) -> int:
    return run_all([login_command(backend_url(environ)), up_command(stack)])[0]


def stack_outputs(stack: str) -> dict[str, Any]:
    """`pulumi stack output --json` (secrets stay masked: none of the outputs read here is one)."""
    answer = subprocess.run(  # noqa: S603 - fixed argv, no shell
        outputs_command(stack), capture_output=True, text=True, check=False
    )
    if answer.returncode != 0:
        raise StepError(f"pulumi stack output failed ({answer.returncode}): {answer.stderr.strip()[:300]}")
    try:
        outputs = json.loads(answer.stdout)
    except ValueError:
        raise StepError("pulumi stack output --json did not print JSON") from None
    if not isinstance(outputs, dict):
        raise StepError("pulumi stack output --json did not print an object")
    return outputs


def output(outputs: Mapping[str, Any], name: str, stack: str) -> str:
    value = outputs.get(name)
    if not isinstance(value, str) or not value:
        raise StepError(f"stack {stack} has no output {name!r}; did `pulumi up` complete?")
    return value
