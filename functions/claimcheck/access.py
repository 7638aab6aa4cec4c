"""The typed access table: which tenants, purposes and classifications each caller may use.

One source of truth: the stack config's ``claimcheck:producerPrincipals`` (infra/) or the local
stack's identities (local/identity/), written to the app setting ``CLAIMCHECK_ACCESS_TABLE`` as JSON:

    [{"name": "acme-intake", "principal": "<object id or app id>",
      "tenants": ["acme"], "purposes": ["contract-review"], "classifications": ["internal"]},
     {"name": "reviewers", "group": "<group object id>", "tenants": ["acme", "globex"]},
     {"name": "auditors", "role": "<app role value>", "tenants": ["acme"]}]

Each grant names its callers by exactly one of ``principal`` (the token's ``oid``, or its ``azp`` /
``appid`` when the token is app-only: a user's delegated token names the app the user signed in
with there, and is that user's, not the app's), ``role`` (a value of its ``roles`` claim) or
``group`` (a value of its ``groups`` claim); only claims of a validated token count, so a caller
cannot state its way into a grant.
``purposes`` and ``classifications`` may be omitted (= all the purpose table allows). A tenant entry
is an exact tenant id, or a prefix ending in ``*`` (``t-*``: every tenant id starting with ``t-``).
A tenant header only *selects* among the caller's tenants; it never grants one. Every refusal reads
the same, whether the tenant exists or not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from claimcheck.callers import Caller
from claimcheck.policy import Classification
from claimcheck.settings import SettingsError

ACCESS_TABLE_SETTING = "CLAIMCHECK_ACCESS_TABLE"

# What a tenant id may look like: letters, digits, '.', '_', '-' (no quote, space or other character
# that means something to OData filters or Table keys: '/', '\\', '#', '?').
TENANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\*?")

FORBIDDEN_BODY = {
    "error": "forbidden",
    "message": "this caller may not use that tenant, purpose or classification",
}


class AccessForbidden(Exception):
    """403: the caller may not act for that tenant, purpose or classification (same text for all)."""

    def __init__(self) -> None:
        super().__init__(FORBIDDEN_BODY["message"])


def valid_tenant_id(tenant_id: str) -> bool:
    return TENANT_ID.fullmatch(tenant_id) is not None


class GrantClaim(StrEnum):
    """Which token claim a grant's ``principal`` value is matched against (also its JSON key)."""

    PRINCIPAL = "principal"  # the caller's object id or app id
    ROLE = "role"  # one of the caller's app roles
    GROUP = "group"  # one of the caller's group object ids


@dataclass(frozen=True)
class AccessGrant:
    name: str
    principal: str  # the object id / app id, the app-role value or the group id, as `claim` says
    tenants: tuple[str, ...]
    purposes: frozenset[str] | None = None  # None: every purpose
    classifications: frozenset[Classification] | None = None  # None: every classification
    claim: GrantClaim = GrantClaim.PRINCIPAL

    def matches(self, caller: Caller) -> bool:
        if self.claim is GrantClaim.ROLE:
            return self.principal in caller.roles
        if self.claim is GrantClaim.GROUP:
            return self.principal in caller.groups
        return self.principal in caller.principal_ids

    def allows_tenant(self, tenant_id: str) -> bool:
        if not valid_tenant_id(tenant_id):
            return False
        return any(
            tenant_id.startswith(entry[:-1]) if entry.endswith("*") else tenant_id == entry
            for entry in self.tenants
        )

    def allows(self, tenant_id: str, purpose: str, classification: str) -> bool:
        return (
            self.allows_tenant(tenant_id)
            and (self.purposes is None or purpose in self.purposes)
            and (self.classifications is None or classification in self.classifications)
        )

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            self.claim.value: self.principal,
            "tenants": list(self.tenants),
        }
        if self.purposes is not None:
            entry["purposes"] = sorted(self.purposes)
        if self.classifications is not None:
            entry["classifications"] = sorted(level.value for level in self.classifications)
        return entry


@dataclass(frozen=True)
class AccessTable:
    grants: tuple[AccessGrant, ...]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AccessTable:
        """An absent setting is an empty table: every caller is refused, nobody is let in by default."""
        return cls.parse(env.get(ACCESS_TABLE_SETTING, "[]"))

    @classmethod
    def parse(cls, text: str) -> AccessTable:
        try:
            entries = json.loads(text)
        except ValueError:
            raise SettingsError(f"{ACCESS_TABLE_SETTING} is not JSON") from None
        if not isinstance(entries, list):
            raise SettingsError(f"{ACCESS_TABLE_SETTING} must be a JSON list of grants")
        return cls(tuple(_grant(index, entry) for index, entry in enumerate(entries)))

    def to_json(self) -> str:
        return json.dumps([grant.to_json() for grant in self.grants], separators=(",", ":"))

    def grants_for(self, caller: Caller) -> list[AccessGrant]:
        return [grant for grant in self.grants if grant.matches(caller)]

    def may_see_tenant(self, caller: Caller, tenant_id: str) -> bool:
        """Whether ``caller`` is granted ``tenant_id`` (``read_scope`` with no tenant stated)."""
        return self.read_scope(caller, None)(tenant_id)

    def read_scope(self, caller: Caller, selected_tenant: str | None) -> Callable[[str], bool]:
        """Which tenants' data a read route may show ``caller``: those it is granted, narrowed to
        ``selected_tenant`` (the request's ``X-Tenant-Id``) when one is stated. The one rule of every
        tenant-scoped read (work-item status and result, the operator dead-letter routes).

        A stated tenant only narrows: one the caller is not granted (or a malformed one, or an empty
        header) selects nothing, and the route answers exactly as for data that does not exist (404
        like an unknown id, an empty list), never a refusal that would confirm the tenant exists."""
        grants = self.grants_for(caller)

        def visible(tenant_id: str) -> bool:
            if selected_tenant is not None and tenant_id != selected_tenant:
                return False
            return any(grant.allows_tenant(tenant_id) for grant in grants)

        return visible

    def check(self, caller: Caller, *, tenant_id: str, purpose: str, classification: str) -> None:
        """``AccessForbidden`` unless one of the caller's grants covers all three."""
        if not any(grant.allows(tenant_id, purpose, classification) for grant in self.grants_for(caller)):
            raise AccessForbidden()


def _grant(index: int, entry: Any) -> AccessGrant:
    where = f"{ACCESS_TABLE_SETTING}[{index}]"
    if not isinstance(entry, dict):
        raise SettingsError(f"{where} must be an object with name, principal (or role or group) and tenants")
    claim_keys = {claim.value for claim in GrantClaim}
    unknown = set(entry) - {"name", "tenants", "purposes", "classifications"} - claim_keys
    if unknown:
        raise SettingsError(f"{where} has unknown keys {sorted(unknown)}")
    named_by = sorted(claim_keys & set(entry))
    if len(named_by) != 1:
        raise SettingsError(f"{where} needs exactly one of principal (object id or app id), role or group")
    claim = GrantClaim(named_by[0])
    name, principal = entry.get("name"), entry[claim.value]
    if not isinstance(name, str) or not name or not isinstance(principal, str) or not principal:
        raise SettingsError(f"{where} needs a non-empty name and {claim.value}")
    tenants = _strings(entry.get("tenants"), f"{where}.tenants")
    if not tenants:
        raise SettingsError(f"{where}.tenants must list at least one tenant")
    for tenant in tenants:
        if _TENANT_PATTERN.fullmatch(tenant) is None:
            raise SettingsError(
                f"{where}.tenants: {tenant!r} is not a tenant id (letters, digits, . _ -) "
                "or a prefix ending in *"
            )
    purposes = (
        None if "purposes" not in entry else frozenset(_strings(entry["purposes"], f"{where}.purposes"))
    )
    classifications = None
    if "classifications" in entry:
        names = _strings(entry["classifications"], f"{where}.classifications")
        try:
            classifications = frozenset(Classification(value) for value in names)
        except ValueError:
            raise SettingsError(
                f"{where}.classifications must be among {[level.value for level in Classification]}"
            ) from None
    return AccessGrant(name, principal, tuple(tenants), purposes, classifications, claim)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise SettingsError(f"{where} must be a list of non-empty strings")
    return list(value)
