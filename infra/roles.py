"""Role definitions (built-in and the stack's custom ones) and deterministic GUID names.

Built-in GUIDs are Azure's role ids (learn.microsoft.com, "Azure built-in roles"); they are the same
in every tenant. A custom role's GUID is a uuid5 over its assignable scope and key, and an
assignment's name a uuid5 over scope, role and principal, so re-running the program never creates a
duplicate and a changed scope or principal is a replacement, not a leak.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
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
    # Get User Delegation Key only (an action, no data action): signs the direct-upload grants.
    STORAGE_BLOB_DELEGATOR = "db58b8e5-c6ad-4a2a-8342-4190687cbf4a"


# Roles that grant access to data (messages, blobs, tables): these must sit at entity scope.
SERVICE_BUS_DATA_ROLES = frozenset(
    {
        BuiltInRole.SERVICE_BUS_DATA_RECEIVER.value,
        BuiltInRole.SERVICE_BUS_DATA_SENDER.value,
        BuiltInRole.SERVICE_BUS_DATA_OWNER.value,
    }
)
STORAGE_DATA_ROLES = frozenset(
    {
        BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR.value,
        BuiltInRole.STORAGE_BLOB_DATA_OWNER.value,
        BuiltInRole.STORAGE_BLOB_DATA_READER.value,
        BuiltInRole.STORAGE_QUEUE_DATA_CONTRIBUTOR.value,
        BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR.value,
        BuiltInRole.STORAGE_TABLE_DATA_READER.value,
    }
)
DATA_ROLES = SERVICE_BUS_DATA_ROLES | STORAGE_DATA_ROLES

# The built-in roles the program assigns (infra/program.py, some only with producers, operators or
# smoke principals): the one list the CI deploy identity's role-assignment condition allows
# (scripts/bootstrap_ci.py); tests/infra/test_access.py proves the program assigns exactly these.
STACK_ASSIGNED_BUILT_IN_ROLES = frozenset(
    {
        BuiltInRole.SERVICE_BUS_DATA_OWNER,
        BuiltInRole.SERVICE_BUS_DATA_SENDER,
        BuiltInRole.STORAGE_BLOB_DATA_OWNER,
        BuiltInRole.STORAGE_BLOB_DELEGATOR,
        BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR,
        BuiltInRole.MONITORING_METRICS_PUBLISHER,
    }
)


_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"


class BlobDataAction(Enum):
    """Blob data actions ("Permissions for Blob service operations"; "Actions and attributes for Azure
    role assignment conditions for Azure Blob Storage"). Storage Blob Data Contributor has read,
    write, delete, add/action and move/action but none of the tag actions, which are separate
    permissions; only Storage Blob Data Owner has them among the built-in roles."""

    READ = f"{_BLOBS}/read"  # Get Blob, Get Blob Properties
    WRITE = f"{_BLOBS}/write"  # Put Block, Put Block List
    DELETE = f"{_BLOBS}/delete"  # Delete Blob (and its snapshots)
    TAGS_READ = f"{_BLOBS}/tags/read"  # Get Blob Tags
    TAGS_WRITE = f"{_BLOBS}/tags/write"  # Set Blob Tags, and x-ms-tags on Put Block List
    FIND_BY_TAGS = f"{_BLOBS}/filter/action"  # Find Blobs by Tags (container-scoped here)


@dataclass(frozen=True)
class CustomRole:
    """A data-plane role the stack defines because no built-in role fits; `key` is part of its GUID."""

    key: str
    display_name: str
    description: str
    data_actions: tuple[BlobDataAction, ...]


# The Function App: uploads provisional objects (staged blocks, commit with the provisional tag,
# write-once), activates them (Set Blob Tags), reads them conditionally, deletes them (cleanup,
# reconciliation), reads tags and finds provisional objects by tag (reconciliation). Not granted:
# add/action (Put Block needs write anyway), move/action (hierarchical namespace only),
# deleteBlobVersion/permanentDelete (old versions go by the lifecycle policy), ownership/ACL actions.
PAYLOAD_OPERATOR = CustomRole(
    "payload-operator",
    "Claim Check payload operator",
    "Claim Check Function App on the payloads container: read, write-once upload, delete, and blob "
    "index tags (set, read, find) for provisional/active state.",
    (
        BlobDataAction.READ,
        BlobDataAction.WRITE,
        BlobDataAction.DELETE,
        BlobDataAction.TAGS_READ,
        BlobDataAction.TAGS_WRITE,
        BlobDataAction.FIND_BY_TAGS,
    ),
)
# The one custom role: producers hold no data-plane role (only the app writes payloads and records).
CUSTOM_ROLES = (PAYLOAD_OPERATOR,)


def role_definition_id(subscription_id: str, role_guid: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{role_guid}"


def custom_role_guid(assignable_scope: str, role: CustomRole) -> str:
    """Deterministic GUID name of a custom role definition at one assignable scope."""
    return str(uuid.uuid5(_ASSIGNMENT_NAMESPACE, f"custom-role|{assignable_scope.lower()}|{role.key}"))


def custom_role_display_name(role: CustomRole, assignable_scope: str, stack_label: str) -> str:
    """The role's display name, unique per tenant as Azure requires: the stack (`project/stack`) and a
    short hash of the assignable scope, which holds the subscription id and the resource group, so
    two forks' `dev` stacks in one tenant (other subscription, same group name) get different names."""
    digest = hashlib.sha256(f"{assignable_scope.lower()}|{stack_label}".encode()).hexdigest()[:10]
    return f"{role.display_name} ({stack_label} {digest})"


def assignment_name(scope: str, role_guid: str, principal_id: str) -> str:
    """Deterministic GUID name for one (scope, role, principal) assignment."""
    key = f"{scope.lower()}|{role_guid.lower()}|{principal_id.lower()}"
    return str(uuid.uuid5(_ASSIGNMENT_NAMESPACE, key))


def role_guid(role_definition: str) -> str:
    """The GUID at the end of a role definition id (or the GUID itself), lower-case."""
    return role_definition.rstrip("/").rsplit("/", 1)[-1].lower()
