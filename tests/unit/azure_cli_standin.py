"""A stand-in `az` for scripts/bootstrap_ci.py's tests: the subset of commands the bootstrap runs,
over a JSON file of Entra and ARM objects, refusing what the real CLI and services refuse.

Strict where the real ones are: a second service principal for one appId, a federated credential
whose name or issuer+subject an application already has, a custom role whose name exists in the
tenant, a role assignment that exists for the same principal, role and scope (ARM's
RoleAssignmentExists), a Graph app role assigned twice, an upsert PATCH without
`Prefer: create-if-missing` on a missing application (404), an unknown command or argument (exit
2, like the CLI's parser). Each error goes to stderr, like the CLI's; AZ_STANDIN_FAIL makes the
commands starting with its value fail as ARM answers a caller without the right. `az ad app create` is refused
outright: it matches an existing app by display name and updates it (Azure/azure-cli #30427), the
reason the bootstrap upserts by uniqueName. Not modelled: replication delays, paging, and OData
beyond `<property> eq '<value>'`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

GRAPH = "https://graph.microsoft.com/v1.0"
GRAPH_APP_ID = "00000003-0000-0000-c000-000000000000"
GRAPH_SP_ID = "6f8c0000-0000-4000-8000-00000000beef"
GRAPH_APP_ROLES = [
    {"id": "18a4783c-866b-4cc7-a460-3d5e5662c884", "value": "Application.ReadWrite.OwnedBy"},
    {"id": "06b708a9-e830-4db3-a914-8e69da51d44f", "value": "AppRoleAssignment.ReadWrite.All"},
    {"id": "9a5d68dd-52b0-4cc2-bd40-abcf44ac3a30", "value": "Application.Read.All"},
    {"id": "19dbc75e-c2e2-444c-a770-ec69d8559fc7", "value": "Directory.ReadWrite.All"},
]


class Refused(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _empty() -> dict[str, Any]:
    return {
        "groups": {},
        "apps": [],
        "sps": [{"id": GRAPH_SP_ID, "appId": GRAPH_APP_ID, "appRoles": GRAPH_APP_ROLES}],
        "credentials": {},
        "graph_assignments": [],
        "role_definitions": [],
        "role_assignments": [],
        "log": [],
    }


def _options(args: list[str], allowed: dict[str, bool]) -> dict[str, str]:
    """--name value pairs (flag=True: takes a value); anything else is the CLI parser's exit 2."""
    found: dict[str, str] = {}
    index = 0
    while index < len(args):
        name = args[index]
        if name not in allowed:
            raise Refused(f"ERROR: unrecognized arguments: {' '.join(args[index:])}", 2)
        if allowed[name]:
            if index + 1 >= len(args):
                raise Refused(f"ERROR: argument {name}: expected one argument", 2)
            found[name] = args[index + 1]
            index += 2
        else:
            found[name] = "true"
            index += 1
    return found


def _filter(expression: str) -> tuple[str, str]:
    match = re.fullmatch(r"(\w+) eq '([^']*)'", expression)
    if not match:
        raise Refused(f"ERROR: Invalid filter clause: {expression}")
    return match.group(1), match.group(2)


def _require(options: dict[str, str], *names: str) -> None:
    missing = [name for name in names if name not in options]
    if missing:
        raise Refused(f"ERROR: the following arguments are required: {', '.join(missing)}", 2)


class Cli:
    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def run(self, args: list[str]) -> Any:
        common = {"--output": True}
        if args[:2] == ["group", "exists"]:
            options = _options(args[2:], {"--name": True, **common})
            _require(options, "--name")
            return "true" if options["--name"].lower() in self.state["groups"] else "false"
        if args[:2] == ["group", "create"]:
            options = _options(args[2:], {"--name": True, "--location": True, **common})
            _require(options, "--name", "--location")
            name = options["--name"]
            group = {"id": f"/subscriptions/sub/resourceGroups/{name}", "name": name}
            self.state["groups"][name.lower()] = group
            return group
        if args[:3] == ["ad", "app", "list"]:
            key, value = _filter(_options(args[3:], {"--filter": True, **common})["--filter"])
            return [app for app in self.state["apps"] if app.get(key) == value]
        if args[:3] == ["ad", "app", "create"]:
            raise Refused("stand-in: az ad app create matches by display name; use the upsert", 2)
        if args[:3] == ["ad", "sp", "list"]:
            key, value = _filter(_options(args[3:], {"--filter": True, **common})["--filter"])
            return [sp for sp in self.state["sps"] if sp.get(key) == value]
        if args[:3] == ["ad", "sp", "show"]:
            options = _options(args[3:], {"--id": True, **common})
            found = [sp for sp in self.state["sps"] if options["--id"] in (sp["appId"], sp["id"])]
            if not found:
                raise Refused(f"ERROR: Service principal '{options['--id']}' doesn't exist")
            return found[0]
        if args[:3] == ["ad", "sp", "create"]:
            options = _options(args[3:], {"--id": True, **common})
            app_id = options["--id"]
            if not any(app["appId"] == app_id for app in self.state["apps"]):
                raise Refused(f"ERROR: Resource '{app_id}' does not exist")
            if any(sp["appId"] == app_id for sp in self.state["sps"]):
                raise Refused(
                    "ERROR: Another object with the same value for property servicePrincipalNames "
                    "already exists."
                )
            sp = {"id": str(uuid.uuid4()), "appId": app_id}
            self.state["sps"].append(sp)
            return sp
        if args[:4] == ["ad", "app", "federated-credential", "list"]:
            options = _options(args[4:], {"--id": True, **common})
            return self.state["credentials"].get(self._app(options["--id"])["appId"], [])
        if args[:4] == ["ad", "app", "federated-credential", "create"]:
            options = _options(args[4:], {"--id": True, "--parameters": True, **common})
            _require(options, "--id", "--parameters")
            app = self._app(options["--id"])
            credential = json.loads(options["--parameters"])
            existing = self.state["credentials"].setdefault(app["appId"], [])
            if any(c["name"] == credential["name"] for c in existing):
                raise Refused(
                    f"ERROR: FederatedIdentityCredential with name {credential['name']} already exists."
                )
            if any(
                (c["issuer"], c["subject"]) == (credential["issuer"], credential["subject"]) for c in existing
            ):
                raise Refused(
                    "ERROR: A federated identity credential with this issuer and subject already exists."
                )
            existing.append(credential)
            return credential
        if args[:1] == ["rest"]:
            return self._rest(
                _options(
                    args[1:], {"--method": True, "--url": True, "--headers": True, "--body": True, **common}
                )
            )
        if args[:3] == ["role", "definition", "list"]:
            options = _options(args[3:], {"--name": True, "--custom-role-only": True, **common})
            return [d for d in self.state["role_definitions"] if d["roleName"] == options.get("--name")]
        if args[:3] in (["role", "definition", "create"], ["role", "definition", "update"]):
            options = _options(args[3:], {"--role-definition": True, **common})
            wanted = json.loads(options["--role-definition"])
            same = [d for d in self.state["role_definitions"] if d["roleName"] == wanted["Name"]]
            if args[2] == "create" and same:
                raise Refused(
                    "ERROR: (RoleDefinitionWithSameNameExists) A custom role with the same name already "
                    "exists in this directory. Use a different name."
                )
            definition = {
                "name": wanted.get("Id") or str(uuid.uuid4()),
                "roleName": wanted["Name"],
                "permissions": [{"actions": wanted["Actions"], "dataActions": wanted["DataActions"]}],
                "assignableScopes": wanted["AssignableScopes"],
            }
            self.state["role_definitions"] = [d for d in self.state["role_definitions"] if d not in same]
            self.state["role_definitions"].append(definition)
            return definition
        if args[:3] == ["role", "assignment", "list"]:
            options = _options(args[3:], {"--assignee": True, "--role": True, "--scope": True, **common})
            # The CLI resolves both before it lists: an unknown role or principal is an error.
            if "--role" in options and options["--role"] not in self._known_roles():
                raise Refused(f"ERROR: Role '{options['--role']}' doesn't exist.")
            if "--assignee" in options and not any(
                sp["id"] == options["--assignee"] for sp in self.state["sps"]
            ):
                raise Refused(
                    "ERROR: Cannot find user or service principal in graph database for "
                    f"'{options['--assignee']}'."
                )
            return [
                a
                for a in self.state["role_assignments"]
                if a["principalId"] == options.get("--assignee")
                and a["role"] == options.get("--role")
                and a["scope"].lower() == options.get("--scope", "").lower()
            ]
        if args[:3] == ["role", "assignment", "create"]:
            allowed = {
                "--assignee-object-id": True,
                "--assignee-principal-type": True,
                "--role": True,
                "--scope": True,
                "--description": True,
                "--condition": True,
                "--condition-version": True,
                **common,
            }
            options = _options(args[3:], allowed)
            _require(options, "--assignee-object-id", "--assignee-principal-type", "--role", "--scope")
            if ("--condition" in options) != ("--condition-version" in options):
                raise Refused("ERROR: --condition and --condition-version go together")
            if options["--role"] not in self._known_roles():
                raise Refused(f"ERROR: Role '{options['--role']}' doesn't exist.")
            if not any(sp["id"] == options["--assignee-object-id"] for sp in self.state["sps"]):
                raise Refused("ERROR: (PrincipalNotFound) Principal does not exist in the directory.")
            triple = (options["--assignee-object-id"], options["--role"], options["--scope"].lower())
            if any(
                (a["principalId"], a["role"], a["scope"].lower()) == triple
                for a in self.state["role_assignments"]
            ):
                raise Refused("ERROR: (RoleAssignmentExists) The role assignment already exists.")
            assignment = {
                "id": str(uuid.uuid4()),
                "principalId": triple[0],
                "role": triple[1],
                "scope": options["--scope"],
                "condition": options.get("--condition"),
            }
            self.state["role_assignments"].append(assignment)
            return assignment
        if args[:3] == ["role", "assignment", "update"]:
            options = _options(args[3:], {"--role-assignment": True, **common})
            wanted = json.loads(options["--role-assignment"])
            for assignment in self.state["role_assignments"]:
                if assignment["id"] == wanted["id"]:
                    assignment["condition"] = wanted["condition"]
                    return assignment
            raise Refused("ERROR: (RoleAssignmentNotFound) The role assignment does not exist.")
        raise Refused(f"ERROR: 'az {' '.join(args[:3])}' is not a command the stand-in knows", 2)

    def _put_role_definition(self, guid: str, body: dict[str, Any]) -> dict[str, Any]:
        """ARM's PUT of a custom role: create or update by GUID; refused when another role has the
        name (names are unique per tenant) or an assignable scope does not exist."""
        properties = body["properties"]
        if any(
            d["roleName"] == properties["roleName"] and d["name"] != guid
            for d in self.state["role_definitions"]
        ):
            raise Refused('ERROR: Bad Request({"error":{"code":"RoleDefinitionWithSameNameExists"}})')
        for scope in properties["assignableScopes"]:
            group = re.fullmatch(r"/subscriptions/[^/]+/resourceGroups/([^/]+)", scope)
            if group and group.group(1).lower() not in self.state["groups"]:
                raise Refused(f"ERROR: Bad Request(InvalidAssignableScope: {scope} does not exist)")
        definition = {
            "name": guid,
            "roleName": properties["roleName"],
            "permissions": properties["permissions"],
            "assignableScopes": properties["assignableScopes"],
        }
        self.state["role_definitions"] = [d for d in self.state["role_definitions"] if d["name"] != guid]
        self.state["role_definitions"].append(definition)
        return definition

    def _known_roles(self) -> set[str]:
        builtin = {
            "acdd72a7-3385-48ef-bd42-f606fba81ae7",
            "b24988ac-6180-42a0-ab88-20f7382dd24c",
            "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
            "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
            "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
            "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
        }
        custom = self.state["role_definitions"]
        return builtin | {d["roleName"] for d in custom} | {d["name"] for d in custom}

    def _app(self, app_id: str) -> dict[str, Any]:
        for app in self.state["apps"]:
            if app_id in (app["appId"], app["id"]):
                return app  # type: ignore[no-any-return]
        raise Refused(
            f"ERROR: Resource '{app_id}' does not exist or one of its queried reference-property "
            "objects are not present."
        )

    def _rest(self, options: dict[str, str]) -> Any:
        method, url = options["--method"].upper(), options["--url"]
        upsert = re.fullmatch(re.escape(GRAPH) + r"/applications\(uniqueName='([^']+)'\)", url)
        if upsert and method == "PATCH":
            body = json.loads(options.get("--body", "{}"))
            found = [app for app in self.state["apps"] if app["uniqueName"] == upsert.group(1)]
            if found:
                found[0].update(body)
                return None  # 204 No Content
            if options.get("--headers") != "Prefer=create-if-missing":
                raise Refused('ERROR: Not Found({"error":{"code":"Request_ResourceNotFound"}})')
            app = {"id": str(uuid.uuid4()), "appId": str(uuid.uuid4()), "uniqueName": upsert.group(1), **body}
            self.state["apps"].append(app)
            return app  # 201 Created
        definition = re.fullmatch(
            r"https://management\.azure\.com(/subscriptions/[^/]+(?:/resourceGroups/[^/]+)?)"
            r"/providers/Microsoft\.Authorization/roleDefinitions/([0-9a-f-]{36})\?api-version=[\w-]+",
            url,
        )
        if definition and method == "PUT":
            return self._put_role_definition(definition.group(2), json.loads(options["--body"]))
        assigned = re.fullmatch(re.escape(GRAPH) + r"/servicePrincipals/([^/]+)/appRoleAssignments", url)
        if assigned and method == "GET":
            return {
                "value": [a for a in self.state["graph_assignments"] if a["principalId"] == assigned.group(1)]
            }
        if assigned and method == "POST":
            body = json.loads(options["--body"])
            if body["principalId"] != assigned.group(1):
                raise Refused("ERROR: Bad Request: principalId does not match the URL")
            if body in self.state["graph_assignments"]:
                raise Refused(
                    'ERROR: Bad Request({"error":{"message":"Permission being assigned already '
                    'exists on the object"}})'
                )
            self.state["graph_assignments"].append(body)
            return {"id": str(uuid.uuid4()), **body}
        raise Refused(f"ERROR: stand-in Graph has no {method} {url}", 2)


def main() -> int:
    path = Path(os.environ["AZ_STANDIN_STATE"])
    state = json.loads(path.read_text()) if path.exists() else _empty()
    args = sys.argv[1:]
    state["log"].append(args)
    # A failure on demand (e.g. "role assignment create"): what ARM answers a caller without the right.
    failing = os.environ.get("AZ_STANDIN_FAIL")
    try:
        if failing and " ".join(args).startswith(failing):
            raise Refused(
                "ERROR: (AuthorizationFailed) The client 'someone@example.com' does not have "
                "authorization to perform action 'Microsoft.Authorization/roleAssignments/write'"
            )
        result = Cli(state).run(args)
    except Refused as refused:
        path.write_text(json.dumps(state))
        print(str(refused), file=sys.stderr)
        return refused.code
    path.write_text(json.dumps(state))
    if result is not None:
        print(result if isinstance(result, str) else json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
