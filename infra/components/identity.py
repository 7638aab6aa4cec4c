"""The API's Entra ID identity: its app registration, app roles, identifier URI and service principal,
and the app-role assignments of the stack's producer principals (pulumi-azuread).

Callers get access tokens for ``api://<client id>`` (the application ID URI, exported as
``apiAudience``); the Function App validates them itself (claimcheck.auth; docs/identity.md's "Who may
call" section says why in-app validation rather than App Service Authentication).
``app_role_assignment_required`` makes Entra refuse a token to any application without one of these
roles, so the roles are checked twice: by Entra when it issues the token and by the app on every
request.

Ownership: the CI deploy identity manages these objects with Graph Application.ReadWrite.OwnedBy,
which reaches only objects it owns, so `owners` (claimcheck:apiOwnerObjectIds) must hold it from
the first `up`, wherever that runs. The service principal takes them as its declarative `owners`
(the provider adds the caller while creating and removes it unless listed). The registration takes
one ApplicationOwner per owner, except the caller: Entra already made the creator an owner, and
the provider refuses to add an existing owner. Each ApplicationOwner is retained on delete, so when
a later run is made by that owner (its resource leaves the program) ownership stays. Graph lets
an OwnedBy caller add no owner but itself (application-post-owners), so the list should hold just
the CI deploy identity.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pulumi
import pulumi_azuread as azuread
from claimcheck.callers import AppRole

from infra.stack_config import ProducerPrincipal

# A fixed namespace so a role's id is the same on every run (an app role's id must never change: the
# assignments and issued tokens refer to it).
_ROLE_NAMESPACE = uuid.UUID("5d1f3a52-8c55-4f0e-9f3b-2b8f1d0c7a61")

ROLE_DESCRIPTIONS = {
    AppRole.SUBMIT: "Submit documents to the claim-check intake (POST /api/documents)",
    AppRole.READ: "Read work-item status of the caller's tenants (GET /api/work-items/{id})",
    AppRole.OPERATE: "Operate the claim-check stack (status of the caller's tenants, ops commands)",
}


def app_role_id(environment: str, role: AppRole) -> str:
    return str(uuid.uuid5(_ROLE_NAMESPACE, f"claimcheck/{environment}/{role.value}"))


def member_types(callers: Sequence[ProducerPrincipal], role: AppRole) -> list[str]:
    """Who may hold the role: applications, and users and groups ("User" in Entra covers both) only
    when a caller of that kind holds it, so a stack of service principals allows nothing more."""
    people = any(c.principal_type != "ServicePrincipal" and role in c.app_roles for c in callers)
    return ["Application", "User"] if people else ["Application"]


def entra_issuer(tenant_id: str) -> str:
    return f"https://login.microsoftonline.com/{tenant_id}/v2.0"


def entra_jwks_uri(tenant_id: str) -> str:
    return f"https://login.microsoftonline.com/{tenant_id}/discovery/v2.0/keys"


class ApiIdentity(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        environment: str,
        tenant_id: pulumi.Input[str],
        callers: Sequence[ProducerPrincipal],
        owners: Sequence[str] = (),
        group_claims: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:identity:ApiIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.registration = azuread.ApplicationRegistration(
            f"{name}-app",
            display_name=f"claimcheck-api-{environment}",
            sign_in_audience="AzureADMyOrg",
            # v2.0 tokens: iss https://login.microsoftonline.com/<tenant>/v2.0, azp = the caller's client id.
            requested_access_token_version=2,
            # The `groups` claim, for access-table grants by group (stack config groupGrants); off
            # otherwise, so tokens do not carry group ids nobody checks.
            group_membership_claims=["SecurityGroup"] if group_claims else None,
            opts=child,
        )
        self.roles = {
            role: azuread.ApplicationAppRole(
                f"{name}-role-{role.value.lower().replace('.', '-')}",
                application_id=self.registration.id,
                role_id=app_role_id(environment, role),
                value=role.value,
                display_name=role.value,
                description=ROLE_DESCRIPTIONS[role],
                allowed_member_types=member_types(callers, role),
                opts=child,
            )
            for role in AppRole
        }
        self.audience = pulumi.Output.concat("api://", self.registration.client_id)
        self.identifier_uri = azuread.ApplicationIdentifierUri(
            f"{name}-uri", application_id=self.registration.id, identifier_uri=self.audience, opts=child
        )
        caller = azuread.get_client_config().object_id
        self.owners = [
            azuread.ApplicationOwner(
                f"{name}-owner-{owner}",
                application_id=self.registration.id,
                owner_object_id=owner,
                opts=child.merge(pulumi.ResourceOptions(retain_on_delete=True)),
            )
            for owner in owners
            if owner.lower() != caller.lower()
        ]
        self.service_principal = azuread.ServicePrincipal(
            f"{name}-sp",
            client_id=self.registration.client_id,
            app_role_assignment_required=True,
            owners=sorted(owners) or None,
            opts=child,
        )
        self.assignments = [
            azuread.AppRoleAssignment(
                f"{name}-{caller.object_id}-{role.value.lower().replace('.', '-')}",
                app_role_id=app_role_id(environment, role),
                principal_object_id=caller.object_id,
                resource_object_id=self.service_principal.object_id,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.roles[role]]),
            )
            for caller in {caller.object_id: caller for caller in callers}.values()
            for role in caller.app_roles
        ]
        self.issuer = pulumi.Output.from_input(tenant_id).apply(entra_issuer)
        self.jwks_uri = pulumi.Output.from_input(tenant_id).apply(entra_jwks_uri)
        # Both forms of the audience: v1.0 tokens carry the URI, v2.0 tokens the client id.
        self.audiences = pulumi.Output.all(self.audience, self.registration.client_id).apply(
            lambda values: f"{values[0]},{values[1]}"
        )
        self.register_outputs(
            {"audience": self.audience, "clientId": self.registration.client_id, "issuer": self.issuer}
        )
