"""Role assignments: each identity gets the narrowest built-in role at the narrowest scope.

Data roles sit on the entity (queue, topic, container, table), never on the namespace, account,
resource group or subscription when an entity scope exists. The one account-scope data role is the
Function App's on its own host account, which holds nothing but the host's state and code package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_azure_native import authorization

from infra.roles import BuiltInRole, assignment_name, role_definition_id


@dataclass(frozen=True)
class Grant:
    """One role for one principal at one scope; `key` names the logical resource."""

    key: str
    role: BuiltInRole
    scope: pulumi.Input[str]
    principal_id: pulumi.Input[str]


class Access(pulumi.ComponentResource):
    def __init__(self, name: str, *, grants: list[Grant], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("claimcheck:access:Access", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        subscription_id = authorization.get_client_config_output().subscription_id
        self.assignments: dict[str, authorization.RoleAssignment] = {}
        for grant in grants:
            self.assignments[grant.key] = authorization.RoleAssignment(
                f"{name}-{grant.key}",
                role_assignment_name=pulumi.Output.all(grant.scope, grant.principal_id).apply(
                    _name_for(grant.role)),
                scope=grant.scope,
                principal_id=grant.principal_id,
                principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
                role_definition_id=subscription_id.apply(_definition_for(grant.role)),
                description=f"claimcheck: {grant.role.name.replace('_', ' ').lower()}",
                opts=child,
            )
        self.register_outputs({"assignments": list(self.assignments)})


def _name_for(role: BuiltInRole) -> Callable[[list[Any]], str]:
    return lambda values: assignment_name(str(values[0]), role, str(values[1]))


def _definition_for(role: BuiltInRole) -> Callable[[str], str]:
    return lambda subscription_id: role_definition_id(subscription_id, role)
