"""Which dead-lettered messages a tenant-scoped operator may see and replay (DESIGN.md §5a).

A dead-lettered message's application properties are whatever its sender stated: anyone with send
rights on the queue can write ``tenant=acme`` on a message. So the tenant a dead letter belongs to is
the one the app itself recorded for its work item at intake (the work-items table, written from the
caller's proven identity), looked up by the message's session id (= work item id, DESIGN.md §3).

A message is *attributed* to that recorded tenant only when it also states the same tenant, i.e. it is
a message our producer could have sent for that work item. Every other message is unattributable and
the tenant-scoped operator routes show it to nobody:

- its session id is not a work item id, or names no recorded work item (a message nobody submitted
  through intake), or
- it states no tenant, or another tenant than the record's (a forgery, or a bug): showing it to the
  stated tenant's operators would hand them the recorded tenant's work item, and showing it to the
  recorded tenant's operators would name the stated tenant to them.

The access table cannot grant "every tenant" (a tenant entry needs at least one character before
``*``), so no caller of the HTTP API is an all-tenant operator. Unattributable dead letters are the
platform team's: ``claimcheck-ops dlq list/show/replay`` reads the queue with Service Bus data-plane
rights on the entity itself (Azure RBAC, or the emulator's connection string), never a tenant scope.
"""

from __future__ import annotations

from collections.abc import Callable

from claimcheck.envelope import IDENTIFIER


class DeadLetterScope:
    """One operator request's view: ``recorded_tenant`` reads a work item's tenant from the app's own
    record (None: no record), ``may_see_tenant`` is the caller's grant. Each work item is read once per
    request, however many of its messages are dead-lettered."""

    def __init__(
        self, recorded_tenant: Callable[[str], str | None], may_see_tenant: Callable[[str], bool]
    ) -> None:
        self._recorded_tenant = recorded_tenant
        self._may_see_tenant = may_see_tenant
        self._recorded: dict[str, str | None] = {}

    def owner(self, work_item_id: str | None, stated_tenant: str | None) -> str | None:
        """The tenant the dead letter belongs to, or None when it cannot be attributed (module doc)."""
        if work_item_id is None or stated_tenant is None or not IDENTIFIER.fullmatch(work_item_id):
            return None
        if work_item_id not in self._recorded:
            self._recorded[work_item_id] = self._recorded_tenant(work_item_id)
        recorded = self._recorded[work_item_id]
        return recorded if recorded == stated_tenant else None

    def shows(self, work_item_id: str | None, stated_tenant: str | None) -> bool:
        """True when this operator may see (and so replay) the dead letter. A message stating a tenant
        the operator is not granted is not shown whatever its record says (an attributed message states
        its owner), so its record is not read: a list costs reads only for the operator's tenants."""
        if stated_tenant is None or not self._may_see_tenant(stated_tenant):
            return False
        return self.owner(work_item_id, stated_tenant) is not None
