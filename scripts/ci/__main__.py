"""`python -m scripts.ci <step>`: the steps preview.yml, deploy-stack.yml and test.yml run.

Exit status: the failing command's own (pulumi's, pip's, make's, claimcheck-ops'), 2 for a step that
cannot start (a missing variable or stack output, named in one `error:` line).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from scripts.ci import pulumi_steps
from scripts.ci.github_oidc import API_CLIENT_ID, REQUEST_URL
from scripts.ci.pr_comment import CommentError, GitHub, read_previews, render
from scripts.ci.pulumi_steps import StepError

# What the deploy job installs and builds before it deploys (the same commands as a laptop's).
INSTALL_OPS = [
    sys.executable,
    "-m",
    "pip",
    "install",
    "--disable-pip-version-check",
    "-r",
    "requirements-ops.txt",
]
PACKAGE = ["make", "package"]


def ops(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "scripts.ops", *arguments]


def deploy_commands(outputs: Mapping[str, object], stack: str) -> list[list[str]]:
    app_id = pulumi_steps.output(outputs, "functionAppId", stack)
    return [INSTALL_OPS, PACKAGE, ops("deploy", "--app-id", app_id)]


def smoke_command(outputs: Mapping[str, object], stack: str) -> list[str]:
    """The smoke test through the API only; the function key is read through ARM by the command."""
    host = pulumi_steps.output(outputs, "functionAppHostName", stack)
    return ops(
        "smoke",
        "--api",
        f"https://{host}/api",
        "--audience",
        pulumi_steps.output(outputs, "apiAudience", stack),
        "--app-id",
        pulumi_steps.output(outputs, "functionAppId", stack),
    )


def _comment(args: argparse.Namespace) -> int:
    env = os.environ
    missing = [name for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY") if not env.get(name)]
    if missing:
        raise StepError(f"{', '.join(missing)} not set (the comment job's env)")
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    run_url = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env.get('GITHUB_RUN_ID', '')}"
    body = render(
        read_previews(args.previews),
        job_result=args.job_result,
        run_url=run_url,
        known=[env.get(name, "") for name in pulumi_steps.ID_VARIABLES],
    )
    github = GitHub(
        env.get("GITHUB_API_URL", "https://api.github.com"), env["GITHUB_REPOSITORY"], env["GITHUB_TOKEN"]
    )
    try:
        action, comment_id = github.upsert(args.pr, body)
    except CommentError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{action} comment {comment_id} on pull request #{args.pr}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.ci", description=__doc__)
    steps = parser.add_subparsers(dest="step", required=True)
    steps.add_parser("install", help="pulumi install for the program and the policy pack")
    preview = steps.add_parser("preview", help="pulumi login, then preview with the policy pack")
    preview.add_argument("--stack", required=True)
    preview.add_argument("--out-dir", type=Path, required=True, help="where output.txt and outcome.json go")
    up = steps.add_parser("up", help="pulumi login, then up with the policy pack")
    up.add_argument("--stack", required=True)
    deploy = steps.add_parser("deploy", help="install the ops CLI, make package, claimcheck-ops deploy")
    deploy.add_argument("--stack", required=True)
    smoke = steps.add_parser("smoke", help="claimcheck-ops smoke against the stack's API")
    smoke.add_argument("--stack", required=True)
    comment = steps.add_parser("comment", help="create or update the pull request's preview comment")
    comment.add_argument("--pr", type=int, required=True)
    comment.add_argument("--previews", type=Path, required=True, help="the downloaded preview artifacts")
    comment.add_argument("--job-result", default="unknown", help="needs.preview.result")
    args = parser.parse_args(argv)
    try:
        if args.step == "install":
            return pulumi_steps.install()
        if args.step == "preview":
            return pulumi_steps.preview(args.stack, args.out_dir)
        if args.step == "up":
            return pulumi_steps.up(args.stack)
        if args.step == "deploy":
            outputs = pulumi_steps.stack_outputs(args.stack)
            return pulumi_steps.run_all(deploy_commands(outputs, args.stack))[0]
        if args.step == "smoke":
            outputs = pulumi_steps.stack_outputs(args.stack)
            if os.environ.get(REQUEST_URL) and not os.environ.get(API_CLIENT_ID):
                # Unset, the API would be called as the deploy identity, which holds no API role: a
                # 403 that names nothing to fix.
                raise StepError(
                    f"{API_CLIENT_ID} is empty: set the environment's variable AZURE_SMOKE_CLIENT_ID "
                    "(the smoke app's client id, printed by scripts/bootstrap_ci.py)"
                )
            return pulumi_steps.run(smoke_command(outputs, args.stack))
        return _comment(args)
    except StepError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
