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

    @property
    def principal_ids(self) -> tuple[str, ...]:
        """The ids an access-table entry may name this caller by."""
        return tuple(value for value in (self.object_id, self.app_id) if value)
