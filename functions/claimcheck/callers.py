"""Who calls the API: the caller a validated token proves, and the API's app roles.

No third-party import, so the infrastructure program (which declares the app roles) and the access
table can use these without the token library.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AppRole(StrEnum):
    """The API's app roles (declared on its app registration by infra/components/identity.py)."""

    SUBMIT = "Documents.Submit"
    READ = "WorkItems.Read"
    OPERATE = "Operations.Manage"


@dataclass(frozen=True)
class Caller:
    """Who called, as the token proves it: its object id, its client (app) id, its roles and groups."""

    object_id: str
    app_id: str
    directory_tenant: str
    roles: frozenset[str]
    # Group object ids from the token's `groups` claim (Entra emits it only when the API's app
    # registration asks for group claims, and omits it for a caller in too many groups).
    groups: frozenset[str] = frozenset()
    # A user's token obtained through a client app (delegated: it carries `scp`, or `idtyp` "user"):
    # its `azp`/`appid` names the app the user signed in with, not the caller.
    delegated: bool = False

    @property
    def principal_ids(self) -> tuple[str, ...]:
        """The ids an access-table entry may name this caller by: its object id, and its client id
        only when the app itself is the caller (an app-only token). A user signed in through a granted
        app is that user, never the app: otherwise anyone who may sign in to the app would get the
        app's tenants."""
        app_id = "" if self.delegated else self.app_id
        return tuple(value for value in (self.object_id, app_id) if value)
