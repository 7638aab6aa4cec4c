"""Bootstrap of the CI identities (docs/deploy.md, "2. The CI identities"): two Entra applications with
GitHub OIDC federated credentials and no secret, and their Azure roles.

- `<name>-preview`: trusted for pull requests (subject `repo:<owner>/<repo>:pull_request`); Reader on the
  subscription, so `pulumi preview` can read but never change anything.
- `<name>-deploy`: trusted only for jobs in the GitHub environments named like the stacks (subjects
  `repo:<owner>/<repo>:environment:<stack>`); Contributor plus User Access Administrator (the stack
  writes custom role definitions and role assignments), on the subscription.
  It also gets the Microsoft Graph application permissions Application.ReadWrite.OwnedBy and
  AppRoleAssignment.ReadWrite.All (admin consent), because the stack creates the API's app
  registration and its app-role assignments.
- Both, when given: Storage Blob Data Contributor on the state container (azblob backend) and Key
  Vault Crypto User on the secrets key (azurekeyvault secrets provider).

By default the Azure CLI commands are printed (review them, run them yourself); --apply runs them with
the signed-in `az` account, which needs Application Administrator in Entra ID (Privileged Role
Administrator or Global Administrator for the admin consent) and Owner (or User Access Administrator)
on the subscription.

    python -m scripts.bootstrap_ci --repo my-org/claim-check --subscription <id> [--apply]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "api://AzureADTokenExchange"
DEFAULT_STACKS = ("dev", "prod")
PREVIEW_ROLES = ("Reader",)
DEPLOY_ROLES = ("Contributor", "User Access Administrator")
STATE_ROLE = "Storage Blob Data Contributor"
KEY_ROLE = "Key Vault Crypto User"
MICROSOFT_GRAPH = "00000003-0000-0000-c000-000000000000"
# Microsoft Graph application permissions (ids from the Graph permissions reference).
DEPLOY_GRAPH_PERMISSIONS = (
    "18a4783c-866b-4cc7-a460-3d5e5662c884",  # Application.ReadWrite.OwnedBy: the API's app registration
    "06b708a9-e830-4db3-a914-8e69da51d44f",  # AppRoleAssignment.ReadWrite.All: its app-role assignments
)


@dataclass(frozen=True)
class Identity:
    display_name: str
    subjects: tuple[str, ...]
    roles: tuple[str, ...]
    github_variable: str  # where its client id goes in GitHub
    graph_permissions: tuple[str, ...] = ()


def identities(repo: str, name: str, stacks: Sequence[str]) -> tuple[Identity, Identity]:
    """The preview and the deploy identity with their federated subjects and subscription roles."""
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(f"--repo must be <owner>/<repo>, got {repo!r}")
    preview = Identity(
        f"{name}-preview",
        (f"repo:{repo}:pull_request",),
        PREVIEW_ROLES,
        "AZURE_CLIENT_ID (repository variable, used by preview.yml)",
    )
    deploy = Identity(
        f"{name}-deploy",
        tuple(f"repo:{repo}:environment:{stack}" for stack in stacks),
        DEPLOY_ROLES,
        f"AZURE_CLIENT_ID (variable of each environment: {', '.join(stacks)})",
        DEPLOY_GRAPH_PERMISSIONS,
    )
    return preview, deploy


def federated_credential(subject: str) -> dict[str, object]:
    name = subject.split(":", 2)[2].replace(":", "-").replace("/", "-")
    return {"name": f"github-{name}", "issuer": GITHUB_ISSUER, "subject": subject, "audiences": [AUDIENCE]}


def commands(
    identity: Identity, subscription: str, state_scope: str | None, key_scope: str | None
) -> list[list[str]]:
    """az commands for one identity; $APP_ID and $SP_ID stand for values the first two print."""
    steps = [
        [
            "az",
            "ad",
            "app",
            "create",
            "--display-name",
            identity.display_name,
            "--query",
            "appId",
            "--output",
            "tsv",
        ],
        ["az", "ad", "sp", "create", "--id", "$APP_ID", "--query", "id", "--output", "tsv"],
    ]
    steps += [
        [
            "az",
            "ad",
            "app",
            "federated-credential",
            "create",
            "--id",
            "$APP_ID",
            "--parameters",
            json.dumps(federated_credential(subject)),
        ]
        for subject in identity.subjects
    ]
    if identity.graph_permissions:
        steps += [
            [
                "az",
                "ad",
                "app",
                "permission",
                "add",
                "--id",
                "$APP_ID",
                "--api",
                MICROSOFT_GRAPH,
                "--api-permissions",
                *(f"{permission}=Role" for permission in identity.graph_permissions),
            ],
            ["az", "ad", "app", "permission", "admin-consent", "--id", "$APP_ID"],
        ]
    scopes = [(role, f"/subscriptions/{subscription}") for role in identity.roles]
    scopes += [(STATE_ROLE, state_scope)] if state_scope else []
    scopes += [(KEY_ROLE, key_scope)] if key_scope else []
    steps += [
        [
            "az",
            "role",
            "assignment",
            "create",
            "--assignee-object-id",
            "$SP_ID",
            "--assignee-principal-type",
            "ServicePrincipal",
            "--role",
            role,
            "--scope",
            scope,
        ]
        for role, scope in scopes
    ]
    return steps


def script(steps: list[list[str]]) -> str:
    """The commands as a shell script: the first two capture APP_ID and SP_ID for the others."""

    def line(step: list[str]) -> str:
        return shlex.join(step).replace("'$APP_ID'", '"$APP_ID"').replace("'$SP_ID'", '"$SP_ID"')

    return (
        "\n".join(
            [
                f'APP_ID="$({line(steps[0])})"',
                f'SP_ID="$({line(steps[1])})"',
                *(line(step) for step in steps[2:]),
            ]
        )
        + "\n"
    )


def _run(command: list[str], values: dict[str, str]) -> str:
    resolved = [values.get(part, part) for part in command]
    return subprocess.run(resolved, check=True, capture_output=True, text=True).stdout.strip()  # noqa: S603


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create the CI identities with GitHub OIDC federation.")
    parser.add_argument("--repo", required=True, help="GitHub <owner>/<repo> of your fork")
    parser.add_argument("--subscription", required=True, help="Azure subscription id the stacks deploy to")
    parser.add_argument("--stacks", nargs="+", default=list(DEFAULT_STACKS), help="stacks = environments")
    parser.add_argument("--name", default="claimcheck-ci", help="display name prefix of the applications")
    parser.add_argument("--state-container-scope", help="resource id of the azblob state container")
    parser.add_argument("--key-scope", help="resource id of the Key Vault key of the secrets provider")
    parser.add_argument("--apply", action="store_true", help="run the commands instead of printing them")
    args = parser.parse_args(argv)
    try:
        chosen = identities(args.repo, args.name, args.stacks)
    except ValueError as error:
        parser.error(str(error))
    for identity in chosen:
        steps = commands(identity, args.subscription, args.state_container_scope, args.key_scope)
        print(f"# {identity.display_name}: set its application (client) id as {identity.github_variable}")
        if not args.apply:
            print(script(steps))
            continue
        values = {"$APP_ID": _run(steps[0], {})}
        values["$SP_ID"] = _run(steps[1], values)
        for step in steps[2:]:
            _run(step, values)
        print(f"{identity.display_name}: client id {values['$APP_ID']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
