"""Bootstrap of the CI identities (docs/deploy.md, "2. The CI identities"): three Entra applications
with GitHub OIDC federated credentials and no secret, their Azure roles and Graph permissions, and
(by default) the stacks' resource groups they are scoped to.

- `preview` (pull requests): reads. Reader on each stack's resource group, Storage Blob Data Reader
  on the state container, decrypt-only on the secrets key. `pulumi preview` on an Azure Blob
  backend writes nothing: the DIY backend takes its lock, saves checkpoints, history and backups
  only for updates, never for a dry run (pulumi/pulumi pkg/backend/diy/backend.go: `Preview` has no
  `Lock`; `apply` builds its snapshot persister and calls addToHistory/backupStack only when not
  DryRun). The secrets provider decrypts the stack's data key once (pkg/secrets/cloud/manager.go)
  and then works locally; encrypt is used only when a stack is created.
- `deploy` (jobs in the GitHub environments named like the stacks): Contributor and Role Based
  Access Control Administrator limited by a condition to the roles the stack assigns (infra/roles.py)
  and to users, groups and service principals other than itself, each on the stack's resource group;
  Storage Blob Data Contributor on the state container; decrypt-only on the key; Graph
  Application.ReadWrite.OwnedBy, AppRoleAssignment.ReadWrite.All and Application.Read.All. No User
  Access Administrator, nothing on the subscription, and no right to write role definitions: the
  stack's custom roles are defined here, with the GUIDs, names and data actions the program derives,
  so the GUIDs the condition allows cannot be redefined to grant more.
- `smoke` (the same environments): no Azure role at all; the stack gives it the API's app roles for
  the smoke tenant (claimcheck:smokeTestPrincipals), so the smoke test goes through the HTTP API.

Names derive from the repository (<owner>/<repo>) and the stack, so two forks never share an
object. Every object is looked up by a unique attribute before it is created (an application by its
`uniqueName`, created by Graph's upsert; a service principal by its appId; a federated credential
by its subject; a custom role by its name; a role assignment by principal, role and scope), so a
re-run changes nothing and says so. Without --apply only the lookups run and the plan is printed.
A failed `az` call stops the run with the CLI's own error.

Run it signed in with `az login` as someone who is Application Administrator (Privileged Role
Administrator for the Graph app roles) and Owner of the subscription:

    python -m scripts.bootstrap_ci --repo my-org/claim-check --subscription <id> [--apply]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.roles import (
    CUSTOM_ROLES,
    STACK_ASSIGNED_BUILT_IN_ROLES,
    custom_role_display_name,
    custom_role_guid,
)
from infra.stack_config import PRINCIPAL_TYPES, PROJECT, stack_slug

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "api://AzureADTokenExchange"
GRAPH = "https://graph.microsoft.com/v1.0"
ARM = "https://management.azure.com"
ROLE_DEFINITIONS_API = "2022-04-01"
MICROSOFT_GRAPH_APP_ID = "00000003-0000-0000-c000-000000000000"
DEFAULT_STACKS = ("dev", "prod")

# Built-in Azure roles by id ("Azure built-in roles"): ids are the same in every tenant and
# unambiguous where a display name is not.
READER = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"
RBAC_ADMINISTRATOR = "f58310d9-a9f6-439a-9e8d-f62e7b41a168"  # Role Based Access Control Administrator
BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"

ROLE_NAMES = {
    READER: "Reader",
    CONTRIBUTOR: "Contributor",
    RBAC_ADMINISTRATOR: "Role Based Access Control Administrator (conditioned)",
    BLOB_DATA_READER: "Storage Blob Data Reader",
    BLOB_DATA_CONTRIBUTOR: "Storage Blob Data Contributor",
}

KEY_DECRYPT = "Microsoft.KeyVault/vaults/keys/decrypt/action"
ROLE_DEFINITION_ACTIONS = (
    "Microsoft.Authorization/roleDefinitions/read",
    "Microsoft.Authorization/roleDefinitions/write",
    "Microsoft.Authorization/roleDefinitions/delete",
)


@dataclass(frozen=True)
class GraphRole:
    """A Microsoft Graph application permission (an app role of Graph's service principal)."""

    value: str
    id: str
    why: str


# Ids from the Microsoft Graph permissions reference; the bootstrap checks each against the app roles
# Graph's service principal publishes before assigning it.
APPLICATION_READWRITE_OWNEDBY = GraphRole(
    "Application.ReadWrite.OwnedBy",
    "18a4783c-866b-4cc7-a460-3d5e5662c884",
    "create the API's app registration and service principal and change only those it owns",
)
APP_ROLE_ASSIGNMENT_READWRITE_ALL = GraphRole(
    "AppRoleAssignment.ReadWrite.All",
    "06b708a9-e830-4db3-a914-8e69da51d44f",
    "assign the API's app roles to the smoke and producer principals",
)
APPLICATION_READ_ALL = GraphRole(
    "Application.Read.All",
    "9a5d68dd-52b0-4cc2-bd40-abcf44ac3a30",
    "read the API's service principal; Graph requires it beside AppRoleAssignment.ReadWrite.All",
)
DEPLOY_GRAPH_ROLES = (APPLICATION_READWRITE_OWNEDBY, APP_ROLE_ASSIGNMENT_READWRITE_ALL, APPLICATION_READ_ALL)


class BootstrapError(RuntimeError):
    """A failed `az` call (with the CLI's error) or an existing object that contradicts the plan."""


def _slug(text: str, limit: int) -> str:
    """Lower-case [a-z0-9-] of at most `limit` characters; a cut keeps a hash of the whole text."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) <= limit:
        return slug
    digest = hashlib.sha256(text.lower().encode()).hexdigest()[:8]
    return f"{slug[: limit - 9].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class Fork:
    """One fork's bootstrap: where it deploys and what its CI identities may reach."""

    repo: str  # <owner>/<repo>
    subscription: str
    stacks: tuple[str, ...] = DEFAULT_STACKS
    location: str = "westeurope"
    # Scope the identities to the stacks' resource groups (created here); off: the subscription.
    resource_group_scope: bool = True
    state_container: str | None = None  # resource id of the azblob state container
    key: str | None = None  # resource id of the Key Vault key of the azurekeyvault secrets provider

    def __post_init__(self) -> None:
        owner, _, name = self.repo.partition("/")
        if not owner or not name or "/" in name or not re.fullmatch(r"[A-Za-z0-9._/-]+", self.repo):
            raise ValueError(f"--repo must be <owner>/<repo>, got {self.repo!r}")
        for stack in self.stacks:
            stack_slug(stack)  # refuses a stack name that cannot name resources

    @property
    def slug(self) -> str:
        return _slug(self.repo.replace("/", "-"), 30)

    def app_name(self, kind: str) -> str:
        """Display name and uniqueName of one CI application: unique per fork."""
        return f"claimcheck-ci-{self.slug}-{kind}"

    def resource_group(self, stack: str) -> str:
        return f"rg-claimcheck-{self.slug}-{stack_slug(stack)}"

    def resource_group_id(self, stack: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group(stack)}"

    def label(self, scope: str) -> str:
        """A scope as the report names it (resource ids do not fit a terminal line)."""
        if scope == self.state_container:
            return "the state container"
        if scope == self.key:
            return "the secrets key"
        if scope == f"/subscriptions/{self.subscription}":
            return "the subscription"
        return f"group {scope.rsplit('/', 1)[-1]}"

    def scopes(self) -> list[str]:
        """Where the control-plane roles sit: each stack's resource group, or the subscription."""
        if self.resource_group_scope:
            return [self.resource_group_id(stack) for stack in self.stacks]
        return [f"/subscriptions/{self.subscription}"]


@dataclass(frozen=True)
class App:
    kind: str  # preview | deploy | smoke
    unique_name: str
    subjects: tuple[str, ...]
    graph_roles: tuple[GraphRole, ...]
    github_variable: str


@dataclass(frozen=True)
class CustomRole:
    name: str
    description: str
    actions: tuple[str, ...]
    data_actions: tuple[str, ...]
    assignable_scopes: tuple[str, ...]
    # The stack's own roles keep the GUID the program derives (infra/roles.py): written with a PUT.
    guid: str | None = None

    def arm_body(self) -> dict[str, Any]:
        """The role definition as ARM's PUT takes it."""
        permissions = {
            "actions": list(self.actions),
            "notActions": [],
            "dataActions": list(self.data_actions),
        }
        return {
            "properties": {
                "roleName": self.name,
                "description": self.description,
                "type": "CustomRole",
                "permissions": [{**permissions, "notDataActions": []}],
                "assignableScopes": list(self.assignable_scopes),
            }
        }

    def definition(self) -> dict[str, Any]:
        """The JSON `az role definition create --role-definition` takes."""
        return {
            "Name": self.name,
            "IsCustom": True,
            "Description": self.description,
            "Actions": list(self.actions),
            "NotActions": [],
            "DataActions": list(self.data_actions),
            "NotDataActions": [],
            "AssignableScopes": list(self.assignable_scopes),
        }


@dataclass(frozen=True)
class Assignment:
    """One planned role assignment: `role` is a built-in role id or a custom role's name."""

    identity: str
    role: str
    scope: str
    why: str
    condition: str | None = None


def apps(fork: Fork) -> tuple[App, App, App]:
    environments = tuple(f"repo:{fork.repo}:environment:{stack}" for stack in fork.stacks)
    where = f"variable of each environment: {', '.join(fork.stacks)}"
    return (
        App(
            "preview",
            fork.app_name("preview"),
            (f"repo:{fork.repo}:pull_request",),
            (),
            "AZURE_CLIENT_ID (repository variable, used by preview.yml)",
        ),
        App(
            "deploy", fork.app_name("deploy"), environments, DEPLOY_GRAPH_ROLES, f"AZURE_CLIENT_ID ({where})"
        ),
        App("smoke", fork.app_name("smoke"), environments, (), f"AZURE_SMOKE_CLIENT_ID ({where})"),
    )


def decrypt_role(fork: Fork) -> CustomRole | None:
    if fork.key is None:
        return None
    return CustomRole(
        f"Claim Check state decrypt ({fork.slug})",
        "Decrypts the Pulumi stack's data key with the secrets provider's key; nothing else.",
        (),
        (KEY_DECRYPT,),
        (fork.key,),
    )


def role_writer_role(fork: Fork) -> CustomRole:
    return CustomRole(
        f"Claim Check role definition writer ({fork.slug})",
        "Writes the stack's custom role definitions (Contributor cannot; assigning them is the "
        "conditioned Role Based Access Control Administrator's).",
        ROLE_DEFINITION_ACTIONS,
        (),
        tuple(fork.scopes()),
    )


def stack_roles(fork: Fork) -> list[CustomRole]:
    """The stack's custom role (the payload operator) in each stack's group, exactly as the
    program would define them (GUID, name, data actions from infra/roles.py): defined here, the
    deploy identity needs no right to write role definitions (claimcheck:createCustomRoles false).
    With --subscription-scope the groups do not exist yet, so the stack defines them itself."""
    if not fork.resource_group_scope:
        return []
    return [
        CustomRole(
            custom_role_display_name(role, group, f"{PROJECT}/{stack}"),
            role.description,
            (),
            tuple(action.value for action in role.data_actions),
            (group,),
            custom_role_guid(group, role),
        )
        for stack in fork.stacks
        for group in [fork.resource_group_id(stack)]
        for role in CUSTOM_ROLES
    ]


def custom_roles(fork: Fork) -> list[CustomRole]:
    own = [decrypt_role(fork)] + ([] if fork.resource_group_scope else [role_writer_role(fork)])
    return [role for role in own if role is not None] + stack_roles(fork)


def assignable_roles(fork: Fork) -> list[str]:
    """The role ids the deploy identity may assign: the built-in roles the stack assigns and the
    stack's own custom roles, whose ids derive from the resource group (infra/roles.py)."""
    groups = [fork.resource_group_id(stack) for stack in fork.stacks]
    custom = [custom_role_guid(group, role) for group in groups for role in CUSTOM_ROLES]
    return sorted({role.value for role in STACK_ASSIGNED_BUILT_IN_ROLES}) + custom


def assignment_condition(roles: Sequence[str], forbidden_principal: str) -> str:
    """ABAC condition (version 2.0) on Role Based Access Control Administrator ("Delegate Azure role
    assignment management to others with conditions"): a write only for these roles, to users, groups
    or service principals other than `forbidden_principal` (the deploy identity itself); a delete
    only of assignments of these roles."""
    guids = ", ".join(roles)
    types = ", ".join(f"'{kind}'" for kind in PRINCIPAL_TYPES)
    write = "Microsoft.Authorization/roleAssignments/write"
    delete = "Microsoft.Authorization/roleAssignments/delete"
    attribute = "Microsoft.Authorization/roleAssignments"
    return (
        f"((!(ActionMatches{{'{write}'}})) OR "
        f"(@Request[{attribute}:RoleDefinitionId] ForAnyOfAnyValues:GuidEquals {{{guids}}} AND "
        f"@Request[{attribute}:PrincipalType] ForAnyOfAnyValues:StringEqualsIgnoreCase {{{types}}} AND "
        f"@Request[{attribute}:PrincipalId] ForAnyOfAllValues:GuidNotEquals {{{forbidden_principal}}}))"
        f" AND ((!(ActionMatches{{'{delete}'}})) OR "
        f"(@Resource[{attribute}:RoleDefinitionId] ForAnyOfAnyValues:GuidEquals {{{guids}}}))"
    )


def planned_assignments(fork: Fork, principals: dict[str, str]) -> list[Assignment]:
    """Every role assignment of the CI identities; `principals` maps kind -> service principal id."""
    plan: list[Assignment] = []
    for scope in fork.scopes():
        plan += [
            Assignment("preview", READER, scope, "preview reads the deployed resources"),
            Assignment("deploy", CONTRIBUTOR, scope, "creates and updates the stack's resources"),
            Assignment(
                "deploy",
                RBAC_ADMINISTRATOR,
                scope,
                "assigns exactly the roles the stack declares, never to itself",
                assignment_condition(assignable_roles(fork), principals["deploy"]),
            ),
        ]
        if not fork.resource_group_scope:
            plan.append(
                Assignment(
                    "deploy",
                    role_writer_role(fork).name,
                    scope,
                    "writes the stack's custom role definitions (payload operator/writer)",
                )
            )
    if fork.state_container:
        plan += [
            Assignment(
                "preview",
                BLOB_DATA_READER,
                fork.state_container,
                "preview reads the checkpoint; a dry run writes no lock, history or backup",
            ),
            Assignment(
                "deploy",
                BLOB_DATA_CONTRIBUTOR,
                fork.state_container,
                "up writes the lock, checkpoint, history and backups",
            ),
        ]
    decrypt = decrypt_role(fork)
    if decrypt is not None and fork.key is not None:
        plan += [
            Assignment(kind, decrypt.name, fork.key, "decrypts the stack's data key")
            for kind in ("preview", "deploy")
        ]
    return plan


def federated_credential(subject: str) -> dict[str, object]:
    name = subject.split(":", 2)[2].replace(":", "-").replace("/", "-")
    return {"name": f"github-{name}", "issuer": GITHUB_ISSUER, "subject": subject, "audiences": [AUDIENCE]}


def application_body(app: App) -> dict[str, Any]:
    """The application as Graph's upsert writes it: no secret, no redirect, Graph permissions listed."""
    body: dict[str, Any] = {"displayName": app.unique_name, "signInAudience": "AzureADMyOrg"}
    if app.graph_roles:
        body["requiredResourceAccess"] = [
            {
                "resourceAppId": MICROSOFT_GRAPH_APP_ID,
                "resourceAccess": [{"id": role.id, "type": "Role"} for role in app.graph_roles],
            }
        ]
    return body


# ---- the adapter over `az` ---------------------------------------------------------------------


class Az:
    """Runs `az` (the one on PATH); a failure raises BootstrapError with the CLI's stderr."""

    def text(self, *args: str) -> str:
        done = subprocess.run(["az", *args], capture_output=True, text=True, check=False)  # noqa: S603, S607
        if done.returncode != 0:
            shown = " ".join(args[:4])
            raise BootstrapError(f"az {shown} … failed (exit {done.returncode}):\n{done.stderr.strip()}")
        return done.stdout.strip()

    def json(self, *args: str) -> Any:
        out = self.text(*args, "--output", "json") if args[0] != "rest" else self.text(*args)
        return json.loads(out) if out else None


@dataclass
class Report:
    """What the run did (or, without --apply, would do), one line per object."""

    apply: bool
    lines: list[str] = field(default_factory=list)
    changed: int = 0

    def unchanged(self, what: str) -> None:
        self.lines.append(f"  unchanged  {what}")

    def change(self, verb: str, what: str, action: Callable[[], Any]) -> Any:
        self.changed += 1
        self.lines.append(f"  {verb if self.apply else 'would ' + verb.rstrip('d')}  {what}")
        return action() if self.apply else None


class Bootstrap:
    def __init__(self, fork: Fork, az: Az, report: Report) -> None:
        self.fork, self.az, self.report = fork, az, report
        # Custom roles only planned (no --apply): `az role assignment list --role` refuses a name
        # that does not exist, so their assignments are planned without a lookup.
        self.planned_roles: set[str] = set()

    def run(self) -> dict[str, tuple[str, str]]:
        """Ensures everything; returns kind -> (client id, service principal id) ("?" if planned)."""
        if self.fork.resource_group_scope:
            for stack in self.fork.stacks:
                self._resource_group(self.fork.resource_group(stack))
        ids = {app.kind: self._app(app) for app in apps(self.fork)}
        graph = self._graph_service_principal()
        for app in apps(self.fork):
            for role in app.graph_roles:
                self._graph_role(ids[app.kind][1], graph, role)
        for custom in custom_roles(self.fork):
            self._custom_role(custom)
        principals = {kind: sp for kind, (_, sp) in ids.items()}
        for assignment in planned_assignments(self.fork, principals):
            self._assignment(assignment, principals[assignment.identity])
        return ids

    def _resource_group(self, name: str) -> None:
        if self.az.text("group", "exists", "--name", name) == "true":
            self.report.unchanged(f"resource group {name}")
            return
        self.report.change(
            "created",
            f"resource group {name}",
            lambda: self.az.json("group", "create", "--name", name, "--location", self.fork.location),
        )

    def _app(self, app: App) -> tuple[str, str]:
        found = self.az.json("ad", "app", "list", "--filter", f"uniqueName eq '{app.unique_name}'")
        body = application_body(app)
        url = f"{GRAPH}/applications(uniqueName='{app.unique_name}')"
        if not found:
            created = self.report.change(
                "created",
                f"application {app.unique_name}",
                lambda: self.az.json(
                    "rest",
                    "--method",
                    "PATCH",
                    "--url",
                    url,
                    "--headers",
                    "Prefer=create-if-missing",
                    "--body",
                    json.dumps(body),
                ),
            )
            if created is None:
                # Planned only: nothing below it exists yet.
                self.report.change("created", f"principal of {app.unique_name}", lambda: None)
                for subject in app.subjects:
                    self.report.change("created", f"federated credential {subject}", lambda: None)
                return "?", "?"
            app_id = str(created["appId"])
        else:
            current, app_id = found[0], str(found[0]["appId"])
            if any(current.get(key) != value for key, value in body.items()):
                self.report.change(
                    "updated",
                    f"application {app.unique_name}",
                    lambda: self.az.text(
                        "rest", "--method", "PATCH", "--url", url, "--body", json.dumps(body)
                    ),
                )
            else:
                self.report.unchanged(f"application {app.unique_name}")
        return app_id, self._service_principal(app, app_id)

    def _service_principal(self, app: App, app_id: str) -> str:
        found = self.az.json("ad", "sp", "list", "--filter", f"appId eq '{app_id}'")
        if found:
            self.report.unchanged(f"principal of {app.unique_name}")
            sp_id = str(found[0]["id"])
        else:
            created = self.report.change(
                "created",
                f"principal of {app.unique_name}",
                lambda: self.az.json("ad", "sp", "create", "--id", app_id),
            )
            sp_id = str(created["id"]) if created else "?"
        existing = self.az.json("ad", "app", "federated-credential", "list", "--id", app_id) or []
        by_subject = {(c["issuer"], c["subject"]): c for c in existing}
        names = {c["name"] for c in existing}
        for subject in app.subjects:
            credential = federated_credential(subject)
            if (GITHUB_ISSUER, subject) in by_subject:
                self.report.unchanged(f"federated credential {subject}")
                continue
            if credential["name"] in names:
                raise BootstrapError(
                    f"{app.unique_name} has a federated credential named {credential['name']!r} "
                    f"for another subject; expected {subject!r}: fix or delete it"
                )
            self.report.change(
                "created",
                f"federated credential {subject}",
                lambda credential=credential: self.az.json(  # type: ignore[misc]
                    "ad",
                    "app",
                    "federated-credential",
                    "create",
                    "--id",
                    app_id,
                    "--parameters",
                    json.dumps(credential),
                ),
            )
        return sp_id

    def _graph_service_principal(self) -> dict[str, Any]:
        graph: dict[str, Any] = self.az.json("ad", "sp", "show", "--id", MICROSOFT_GRAPH_APP_ID)
        published = {role["id"]: role["value"] for role in graph.get("appRoles", [])}
        for role in DEPLOY_GRAPH_ROLES:
            if published.get(role.id) != role.value:
                raise BootstrapError(f"Microsoft Graph publishes no app role {role.value} with id {role.id}")
        return graph

    def _graph_role(self, sp_id: str, graph: dict[str, Any], role: GraphRole) -> None:
        what = f"Graph {role.value} for the deploy identity"
        if sp_id == "?":
            self.report.change("created", what, lambda: None)
            return
        url = f"{GRAPH}/servicePrincipals/{sp_id}/appRoleAssignments"
        assigned = self.az.json("rest", "--method", "GET", "--url", url)["value"]
        if any(a["appRoleId"] == role.id and a["resourceId"] == graph["id"] for a in assigned):
            self.report.unchanged(what)
            return
        body = {"principalId": sp_id, "resourceId": graph["id"], "appRoleId": role.id}
        self.report.change(
            "created",
            what,
            lambda: self.az.json("rest", "--method", "POST", "--url", url, "--body", json.dumps(body)),
        )

    def _custom_role(self, role: CustomRole) -> None:
        found = self.az.json("role", "definition", "list", "--name", role.name, "--custom-role-only", "true")
        if found and role.guid and found[0]["name"] != role.guid:
            raise BootstrapError(
                f"custom role {role.name!r} exists with id {found[0]['name']}, not {role.guid}: "
                "delete it (the stack refers to its own id)"
            )
        if not found:
            if not self.report.apply:
                self.planned_roles.add(role.name)
            self.report.change("created", f"custom role {role.name}", lambda: self._write_role(role))
            return
        current = found[0]
        permissions = (current.get("permissions") or [{}])[0]
        same = (
            sorted(permissions.get("actions", [])) == sorted(role.actions)
            and sorted(permissions.get("dataActions", [])) == sorted(role.data_actions)
            and sorted(s.lower() for s in current.get("assignableScopes", []))
            == sorted(s.lower() for s in role.assignable_scopes)
        )
        if same:
            self.report.unchanged(f"custom role {role.name}")
            return
        self.report.change(
            "updated", f"custom role {role.name}", lambda: self._write_role(role, current["name"])
        )

    def _write_role(self, role: CustomRole, existing: str | None = None) -> Any:
        if role.guid:
            # PUT creates or updates: the program's GUID at the program's scope (its group).
            url = (
                f"{ARM}{role.assignable_scopes[0]}/providers/Microsoft.Authorization/roleDefinitions/"
                f"{role.guid}?api-version={ROLE_DEFINITIONS_API}"
            )
            return self.az.json(
                "rest", "--method", "PUT", "--url", url, "--body", json.dumps(role.arm_body())
            )
        definition = role.definition() | ({"Id": existing} if existing else {})
        verb = "update" if existing else "create"
        return self.az.json("role", "definition", verb, "--role-definition", json.dumps(definition))

    def _assignment(self, assignment: Assignment, sp_id: str) -> None:
        role = ROLE_NAMES.get(assignment.role, assignment.role.split(" (")[0])
        what = f"{assignment.identity}: {role}\n{' ' * 13}on {self.fork.label(assignment.scope)}"
        if sp_id == "?" or assignment.role in self.planned_roles:
            self.report.change("created", what, lambda: None)
            return
        found = [
            existing
            for existing in self.az.json(
                "role",
                "assignment",
                "list",
                "--assignee",
                sp_id,
                "--role",
                assignment.role,
                "--scope",
                assignment.scope,
            )
            if str(existing.get("scope", "")).lower() == assignment.scope.lower()
        ]
        if found and (found[0].get("condition") or None) == assignment.condition:
            self.report.unchanged(what)
            return
        if found:
            updated = {**found[0], "condition": assignment.condition, "conditionVersion": "2.0"}
            self.report.change(
                "updated",
                what,
                lambda: self.az.json(
                    "role", "assignment", "update", "--role-assignment", json.dumps(updated)
                ),
            )
            return
        command = [
            "role",
            "assignment",
            "create",
            "--assignee-object-id",
            sp_id,
            "--assignee-principal-type",
            "ServicePrincipal",
            "--role",
            assignment.role,
            "--scope",
            assignment.scope,
            "--description",
            f"claimcheck CI: {assignment.why}",
        ]
        if assignment.condition:
            command += ["--condition", assignment.condition, "--condition-version", "2.0"]
        self.report.change("created", what, lambda: self.az.json(*command))


def stack_config_commands(fork: Fork, ids: dict[str, tuple[str, str]]) -> list[str]:
    """What each stack file needs from the bootstrap: its resource group, the CI identity as owner
    of the API's Entra objects, and the smoke identity (the API's roles for the smoke tenant)."""
    deploy_sp, smoke_sp = ids["deploy"][1], ids["smoke"][1]
    lines = []
    smoke = "claimcheck:smokeTestPrincipals[0]"
    for stack in fork.stacks:
        values = [("", "claimcheck:resourceGroupName", fork.resource_group(stack))]
        if fork.resource_group_scope:
            values.append(("", "claimcheck:createResourceGroup", "false"))
            values.append(("", "claimcheck:createCustomRoles", "false"))
        values += [
            (" --path", "'claimcheck:apiOwnerObjectIds[0]'", deploy_sp),
            (" --path", f"'{smoke}.name'", "ci-smoke"),
            (" --path", f"'{smoke}.objectId'", smoke_sp),
            (" --path", f"'{smoke}.principalType'", "ServicePrincipal"),
        ]
        # One command per key over three lines, so each fits a terminal.
        lines += [
            f"pulumi config set --stack {stack}{flag} \\\n    {key} \\\n    {value}"
            for flag, key, value in values
        ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create the CI identities with GitHub OIDC federation.")
    parser.add_argument("--repo", required=True, help="GitHub <owner>/<repo> of your fork")
    parser.add_argument("--subscription", required=True, help="Azure subscription id the stacks deploy to")
    parser.add_argument("--stacks", nargs="+", default=list(DEFAULT_STACKS), help="stacks = environments")
    parser.add_argument("--location", default="westeurope", help="region of the resource groups")
    parser.add_argument(
        "--subscription-scope",
        action="store_true",
        help="grant on the subscription instead of the stacks' resource groups (a subscription of "
        "its own; the stack then creates its resource group)",
    )
    parser.add_argument("--state-container-scope", help="resource id of the azblob state container")
    parser.add_argument("--key-scope", help="resource id of the Key Vault key of the secrets provider")
    parser.add_argument("--apply", action="store_true", help="make the changes (default: plan only)")
    args = parser.parse_args(argv)
    try:
        fork = Fork(
            args.repo,
            args.subscription,
            tuple(args.stacks),
            args.location,
            not args.subscription_scope,
            args.state_container_scope,
            args.key_scope,
        )
    except ValueError as error:
        parser.error(str(error))
    report = Report(args.apply)
    try:
        ids = Bootstrap(fork, Az(), report).run()
    except BootstrapError as error:
        print("\n".join(report.lines))
        print(f"bootstrap stopped: {error}", file=sys.stderr)
        return 1
    print("\n".join(report.lines))
    if not report.changed:
        print("Nothing to change: every object already exists as planned.")
    elif not args.apply:
        print(f"{report.changed} change(s) planned; run again with --apply to make them.")
    for app in apps(fork):
        print(f"# {app.unique_name}\n#   client id {ids[app.kind][0]}\n#   -> {app.github_variable}")
    print("# Stack config (then commit the stack files):")
    print("\n".join(stack_config_commands(fork, ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
