"""The local callers: who they are (object id, app id), which app roles they hold, which tenants.

This table is the local stack's one source of truth for identity: the issuer puts the roles in the
tokens it mints (as Entra puts the app-role assignments there), and local/stack.py writes the
access table derived from it into the Function App's settings (as infra/ does from the stack config).
"""

from __future__ import annotations

from dataclasses import dataclass

from claimcheck.access import AccessGrant, AccessTable, GrantClaim
from claimcheck.auth import AppRole
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.settings import consumer_settings

# A fixed directory (tenant) id and application ID URI, shaped like Entra's.
LOCAL_DIRECTORY_TENANT = "9c0ffee0-0000-4000-8000-00000000c1a1"
LOCAL_AUDIENCE = "api://claimcheck-local"
# Stands in for the principal id of the Function App's managed identity (on Azure infra/ writes the
# real one): the consumer's identity, and the one allowed consumer of every purpose.
LOCAL_APP_PRINCIPAL_ID = "0b1ec7a1-0000-4000-8000-0000000000a0"


@dataclass(frozen=True)
class LocalIdentity:
    name: str  # also its client id at the local token endpoint
    object_id: str
    app_id: str
    roles: tuple[AppRole, ...]
    tenants: tuple[str, ...]

    def grant(self) -> AccessGrant:
        return AccessGrant(name=self.name, principal=self.object_id, tenants=self.tenants)


LOCAL_IDENTITIES = (
    # What `make demo` submits and reads as.
    LocalIdentity(
        "local-producer",
        "0b1ec7a1-0000-4000-8000-000000000001",
        "a99a0000-0000-4000-8000-000000000001",
        (AppRole.SUBMIT, AppRole.READ),
        ("acme", "globex", "initech"),
    ),
    # What claimcheck-ops uses locally (smoke-test: the tenant of `claimcheck-ops smoke`).
    LocalIdentity(
        "local-operator",
        "0b1ec7a1-0000-4000-8000-000000000002",
        "a99a0000-0000-4000-8000-000000000002",
        (AppRole.SUBMIT, AppRole.READ, AppRole.OPERATE),
        ("acme", "globex", "initech", "smoke-test"),
    ),
    # What the end-to-end tests use: every tenant whose id starts with t-.
    LocalIdentity(
        "local-tests",
        "0b1ec7a1-0000-4000-8000-000000000003",
        "a99a0000-0000-4000-8000-000000000003",
        (AppRole.SUBMIT, AppRole.READ),
        ("t-*",),
    ),
)


def identity_named(name: str) -> LocalIdentity:
    for identity in LOCAL_IDENTITIES:
        if identity.name == name:
            return identity
    raise KeyError(f"no local identity {name!r}; known: {[i.name for i in LOCAL_IDENTITIES]}")


# Grants by token claim instead of by caller id: any local identity whose token carries the group or
# the app role gets them (tests/e2e/test_identity.py mints such tokens). The ids are shaped like Entra's.
LOCAL_REVIEWERS_GROUP = "6a0b0000-0000-4000-8000-0000000000c1"
LOCAL_ARCHIVE_ROLE = "Tenants.Archive"
LOCAL_CLAIM_GRANTS = (
    AccessGrant("local-reviewers", LOCAL_REVIEWERS_GROUP, ("g-*",), claim=GrantClaim.GROUP),
    AccessGrant("local-archivists", LOCAL_ARCHIVE_ROLE, ("r-*",), claim=GrantClaim.ROLE),
)


def local_access_table() -> AccessTable:
    return AccessTable(tuple(identity.grant() for identity in LOCAL_IDENTITIES) + LOCAL_CLAIM_GRANTS)


def local_consumer_settings() -> dict[str, str]:
    """CLAIMCHECK_CONSUMER_IDENTITY / CLAIMCHECK_PURPOSE_CONSUMERS, by the function infra/ uses."""
    return consumer_settings(LOCAL_APP_PRINCIPAL_ID, DEFAULT_PURPOSES)
