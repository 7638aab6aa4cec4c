"""Built-in Azure role definitions and deterministic role-assignment names.

GUIDs are Azure's built-in role ids (learn.microsoft.com, "Azure built-in roles"); they are the same
in every tenant. An assignment's name is a uuid5 over scope, role and principal, so re-running the
program never creates a duplicate and a changed scope or principal is a replacement, not a leak.
"""

from __future__ import annotations

import uuid
from enum import Enum

# A fixed namespace for uuid5 so names are stable across machines and runs.
_ASSIGNMENT_NAMESPACE = uuid.UUID("0b6f7c3e-4a8e-5d51-9a1c-6c1a1c2a7e10")


class BuiltInRole(Enum):
    SERVICE_BUS_DATA_RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
    SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"
    SERVICE_BUS_DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"
    STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
    STORAGE_BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
    STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
    STORAGE_QUEUE_DATA_CONTRIBUTOR = "974c5e8b-45b9-4653-ba55-5f855dd0fb88"
    STORAGE_TABLE_DATA_CONTRIBUTOR = "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3"
    STORAGE_TABLE_DATA_READER = "76199698-9eea-4c19-bc75-cec21354c6b6"
    MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"


# Roles that grant access to data (messages, blobs, tables): these must sit at entity scope.
SERVICE_BUS_DATA_ROLES = frozenset({
    BuiltInRole.SERVICE_BUS_DATA_RECEIVER.value,
    BuiltInRole.SERVICE_BUS_DATA_SENDER.value,
    BuiltInRole.SERVICE_BUS_DATA_OWNER.value,
})
STORAGE_DATA_ROLES = frozenset({
    BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR.value,
    BuiltInRole.STORAGE_BLOB_DATA_OWNER.value,
    BuiltInRole.STORAGE_BLOB_DATA_READER.value,
    BuiltInRole.STORAGE_QUEUE_DATA_CONTRIBUTOR.value,
    BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR.value,
    BuiltInRole.STORAGE_TABLE_DATA_READER.value,
})
DATA_ROLES = SERVICE_BUS_DATA_ROLES | STORAGE_DATA_ROLES


def role_definition_id(subscription_id: str, role: BuiltInRole) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{role.value}"


def assignment_name(scope: str, role: BuiltInRole, principal_id: str) -> str:
    """Deterministic GUID name for one (scope, role, principal) assignment."""
    return str(uuid.uuid5(_ASSIGNMENT_NAMESPACE, f"{scope.lower()}|{role.value}|{principal_id.lower()}"))


def role_guid(role_definition: str) -> str:
    """The GUID at the end of a role definition id (or the GUID itself), lower-case."""
    return role_definition.rstrip("/").rsplit("/", 1)[-1].lower()
