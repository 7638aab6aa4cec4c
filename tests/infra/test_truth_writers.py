"""Who can write the truth the consumer checks messages against, per stack (issue 26), under mocks.

The consumer accepts a message only if it matches what intake recorded (claimcheck.provenance): the
work item's row and its receipts (work-items table), the registry record, the idempotency record. That
holds only if nobody but the app's identity can write those tables: Azure Table RBAC is per table, not
per row, so any other writer could record a receipt for any tenant. Sending to the documents queue is
not a write of the truth (every message is checked against it); who can send is asserted too, so that
a new sender is a decision, not an accident.

Every role assignment whose scope covers a table (the table, the account, the resource group, the
subscription) or the documents queue (the queue, the namespace, ...) must have a role this test
classifies: an unknown role there fails it, naming the role.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from infra.roles import BuiltInRole
from tests.infra.pulumi_harness import APP_PRINCIPAL_ID, ProgramRun
from tests.infra.stacks import STACKS, payload_account, stack_run

_TABLE_ACTIONS = "Microsoft.Storage/storageAccounts/tableServices/tables/"
_SEND_ACTION = "Microsoft.ServiceBus/namespaces/messages/send/action"
# Built-in roles by what they allow on a table / on a queue (None: nothing there).
_TABLE_ROLES = {
    BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR.value: "write",
    BuiltInRole.STORAGE_TABLE_DATA_READER.value: "read",
    BuiltInRole.STORAGE_BLOB_DATA_OWNER.value: None,
    BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR.value: None,
    BuiltInRole.STORAGE_BLOB_DATA_READER.value: None,
    BuiltInRole.STORAGE_BLOB_DELEGATOR.value: None,
    BuiltInRole.STORAGE_QUEUE_DATA_CONTRIBUTOR.value: None,
}
_QUEUE_ROLES = {
    BuiltInRole.SERVICE_BUS_DATA_SENDER.value: "send",
    BuiltInRole.SERVICE_BUS_DATA_OWNER.value: "send",
    BuiltInRole.SERVICE_BUS_DATA_RECEIVER.value: None,
}


def _covers(scope: str, resource_id: str) -> bool:
    scope, resource_id = scope.lower().rstrip("/"), resource_id.lower()
    return resource_id == scope or resource_id.startswith(f"{scope}/")


def _custom_role_rights(run: ProgramRun) -> dict[str, set[str]]:
    """Each custom role's data actions, by its GUID."""
    return {
        str(definition.inputs["roleDefinitionId"]): {
            action for permission in definition.inputs["permissions"] for action in permission["dataActions"]
        }
        for definition in run.of_type("RoleDefinition")
    }


def _holders(run: ProgramRun, resource_id: str, known: dict[str, str | None], custom: str) -> set[str]:
    """The principals whose assignments allow ``known``'s right (or a custom data action starting with
    ``custom``) on ``resource_id``."""
    customs = _custom_role_rights(run)
    holders = set()
    for assignment in run.of_type("RoleAssignment"):
        inputs = assignment.inputs
        if not _covers(inputs["scope"], resource_id):
            continue
        role = str(inputs["roleDefinitionId"]).rsplit("/", 1)[-1]
        if role in customs:
            if any(action.startswith(custom) and not action.endswith("/read") for action in customs[role]):
                holders.add(inputs["principalId"])
            continue
        assert role in known, f"unclassified role {role} on a scope covering {resource_id}"
        if known[role] in ("write", "send"):
            holders.add(inputs["principalId"])
    return holders


def table_writers(run: ProgramRun, table: str) -> set[str]:
    resource = run.one("Table", tableName=table)
    return _holders(run, resource.id, _TABLE_ROLES, _TABLE_ACTIONS)


def queue_senders(run: ProgramRun, queue: str) -> set[str]:
    resource = run.one("Queue", queueName=queue)
    return _holders(run, resource.id, _QUEUE_ROLES, _SEND_ACTION)


def _ids(principals: Iterable[object]) -> set[str]:
    return {str(getattr(principal, "object_id")) for principal in principals}  # noqa: B009


@pytest.mark.parametrize("name", STACKS)
def test_only_the_app_writes_the_registry_work_item_idempotency_and_every_other_table(name: str) -> None:
    settings, run = stack_run(name)
    tables = settings.topology.tables
    for table in tables.all():
        assert table_writers(run, table) == {APP_PRINCIPAL_ID}, table
    # Producers, operators and the smoke-test identities hold nothing on the payload account's tables.
    outsiders = _ids(settings.producer_principals) | _ids(settings.operator_principals)
    outsiders |= _ids(settings.smoke_test_principals)
    account = payload_account(run).id
    assert not [
        a.inputs
        for a in run.of_type("RoleAssignment")
        if a.inputs["principalId"] in outsiders and _covers(a.inputs["scope"], account)
    ]


@pytest.mark.parametrize("name", STACKS)
def test_only_the_app_and_the_operators_can_send_to_the_documents_queue(name: str) -> None:
    """The app publishes intake's messages; an operator's replay sends a dead letter's copy back (checked
    against its record like any message). No producer principal sends: producers use the HTTP API."""
    settings, run = stack_run(name)
    queue = settings.topology.bindings.documents_queue
    assert queue_senders(run, queue) == {APP_PRINCIPAL_ID} | _ids(settings.operator_principals)
    assert not queue_senders(run, queue) & _ids(settings.producer_principals)


def test_the_stack_with_producers_gives_them_no_data_plane_role() -> None:
    """The case the shipped stack files do not cover: a producer principal configured. It is given app
    roles on the API (infra/components/identity.py), and no role assignment at all."""
    settings, run = stack_run("prod+producer")
    (producer,) = settings.producer_principals
    assert [a for a in run.of_type("RoleAssignment") if a.inputs["principalId"] == producer.object_id] == []
