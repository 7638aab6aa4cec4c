"""Which dead-lettered messages a tenant-scoped operator may see and replay (docs/architecture.md §6).

Everything a dead-lettered message states is whatever its sender wrote: anyone with send rights on the
queue can write any session id, ``tenant=acme`` and any envelope. So a dead letter belongs to the work
item of *its record*: the row the app wrote at intake (its tenant from the caller's proven identity),
looked up by the envelope's work item, and only when the message is the one intake published for a
version of it (claimcheck.provenance.attributed: same envelope, session id and routing properties as
the receipt of that version records). The operator routes show it as that record's work item, tenant
and purpose, never as the message states them.

Every other message is unattributable, and the tenant-scoped operator routes show it to nobody: a body
that is no envelope, an envelope of a work item nobody submitted, a copy of a genuine envelope under
another session id or with other properties, an envelope that differs from its version's receipt (all
forgeries, or bugs). Showing one to the stated tenant's operators would hand them another tenant's
work item; showing it to the record's would let any sender add entries to (and replays from) their view.

The access table cannot grant "every tenant" (a tenant entry needs at least one character before
``*``), so no caller of the HTTP API is an all-tenant operator. Unattributable dead letters are the
platform team's: ``claimcheck-ops dlq list/show/replay`` reads the queue with Service Bus data-plane
rights on the entity itself (Azure RBAC, or the emulator's connection string), never a tenant scope.
"""

from __future__ import annotations

from collections.abc import Callable

from claimcheck.provenance import Stated, attributed
from claimcheck.workitems import WorkItemRecord


class DeadLetterScope:
    """One operator request's view: ``record`` reads a work item's row from the app's own table (None: no
    record), ``may_see_tenant`` is the caller's grant. Each work item is read once per request, however
    many of its messages are dead-lettered."""

    def __init__(
        self, record: Callable[[str], WorkItemRecord | None], may_see_tenant: Callable[[str], bool]
    ) -> None:
        self._record = record
        self._may_see_tenant = may_see_tenant
        self._records: dict[str, WorkItemRecord | None] = {}

    def owner(self, stated: Stated | None) -> WorkItemRecord | None:
        """The record the dead letter belongs to, or None when it cannot be attributed (module doc)."""
        if stated is None:
            return None
        work_item_id = stated.envelope.work_item_id  # an identifier (the envelope parser checked it)
        if work_item_id not in self._records:
            self._records[work_item_id] = self._record(work_item_id)
        record = self._records[work_item_id]
        return record if attributed(stated, record) else None

    def shows(self, stated: Stated | None) -> WorkItemRecord | None:
        """The record the dead letter is attributed to, when this operator may see (and so replay) it.
        An attributed message's envelope names its record's tenant, so one naming a tenant the operator
        is not granted is not shown whatever its record says, and its record is not read: a list costs
        reads only for the operator's tenants."""
        if stated is None or not self._may_see_tenant(stated.envelope.tenant_id):
            return None
        record = self.owner(stated)
        return record if record is not None and self._may_see_tenant(record.tenant_id) else None
