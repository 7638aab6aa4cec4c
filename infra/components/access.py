"""Role definitions and assignments: each identity gets the narrowest role at the narrowest scope.

Data roles sit on the entity (queue, topic, container, table), never on the namespace, account,
resource group or subscription when an entity scope exists. The one account-scope data role is the
Function App's on its own host account, which holds nothing but the host's state and code package.

Blob index tags need permissions no built-in role below Storage Blob Data Owner has, so the payload
container gets custom roles (infra/roles.py) with exactly the data actions the code calls. Their
assignable scope is the stack's resource group: Microsoft documents custom roles as assignable at
management group, subscription or resource group scope and advises against resource instances
there (each tenant holds a limited number of custom roles); the assignment, on the container, is
what bounds the access.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import authorization

from infra.roles import (
    BuiltInRole,
    CustomRole,
    assignment_name,
    custom_role_display_name,
    custom_role_guid,
    role_definition_id,
)


@dataclass(frozen=True)
class Grant:
    """One role for one principal at one scope; `key` names the logical resource. `principal_type`
    is the object's type (User, Group or ServicePrincipal): ARM refuses a mismatched one."""

    key: str
    role: BuiltInRole | CustomRole
    scope: pulumi.Input[str]
    principal_id: pulumi.Input[str]
    principal_type: str = "ServicePrincipal"


class Access(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        grants: Sequence[Grant],
        custom_role_scope: pulumi.Input[str],
        stack_label: str,
        create_custom_roles: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:access:Access", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        subscription_id = authorization.get_client_config_output().subscription_id
        self.role_definitions: dict[str, authorization.RoleDefinition] = {}
        role_guids: dict[str, pulumi.Output[str]] = {}
        for role in _custom_roles(grants):
            guid = pulumi.Output.from_input(custom_role_scope).apply(_guid_for(role))
            role_guids[role.key] = guid
            if not create_custom_roles:
                # scripts/bootstrap_ci.py defined it (same GUID, name and data actions, from
                # infra/roles.py), so the CI deploy identity needs no roleDefinitions/write.
                continue
            # Preview API version, why: infra/api_versions.py.
            self.role_definitions[role.key] = authorization.RoleDefinition(
                f"{name}-role-{role.key}",
                role_definition_id=guid,
                # Display names are unique per tenant: the name carries the stack and a hash of the
                # subscription-qualified scope, so two stacks (or forks) in one tenant never collide.
                role_name=pulumi.Output.from_input(custom_role_scope).apply(
                    _display_name_for(role, stack_label)
                ),
                role_type="CustomRole",
                description=role.description,
                scope=custom_role_scope,
                assignable_scopes=[custom_role_scope],
                permissions=[
                    authorization.PermissionArgs(
                        actions=[],
                        not_actions=[],
                        not_data_actions=[],
                        data_actions=[action.value for action in role.data_actions],
                    )
                ],
                opts=child,
            )
        self.assignments: dict[str, authorization.RoleAssignment] = {}
        for grant in grants:
            if isinstance(grant.role, BuiltInRole):
                guid, label, options = pulumi.Output.from_input(grant.role.value), _label(grant.role), child
            else:
                guid, label = role_guids[grant.role.key], grant.role.display_name
                definition = self.role_definitions.get(grant.role.key)
                options = child.merge(pulumi.ResourceOptions(depends_on=[definition] if definition else []))
            self.assignments[grant.key] = authorization.RoleAssignment(
                f"{name}-{grant.key}",
                role_assignment_name=pulumi.Output.all(grant.scope, guid, grant.principal_id).apply(
                    _assignment_name
                ),
                scope=grant.scope,
                principal_id=grant.principal_id,
                principal_type=authorization.PrincipalType(grant.principal_type),
                role_definition_id=pulumi.Output.all(subscription_id, guid).apply(_definition_id),
                description=f"claimcheck: {label.lower()}",
                opts=options,
            )
        self.register_outputs(
            {"assignments": list(self.assignments), "roleDefinitions": list(self.role_definitions)}
        )


def _custom_roles(grants: Sequence[Grant]) -> list[CustomRole]:
    """The distinct custom roles the grants use, in first-use order."""
    roles: dict[str, CustomRole] = {}
    for grant in grants:
        if isinstance(grant.role, CustomRole):
            roles.setdefault(grant.role.key, grant.role)
    return list(roles.values())


def _display_name_for(role: CustomRole, stack_label: str) -> Callable[[str], str]:
    return lambda scope: custom_role_display_name(role, scope, stack_label)


def _label(role: BuiltInRole) -> str:
    return role.name.replace("_", " ")


def _guid_for(role: CustomRole) -> Callable[[str], str]:
    return lambda scope: custom_role_guid(scope, role)


def _assignment_name(values: list[Any]) -> str:
    return assignment_name(str(values[0]), str(values[1]), str(values[2]))


def _definition_id(values: list[Any]) -> str:
    return role_definition_id(str(values[0]), str(values[1]))
