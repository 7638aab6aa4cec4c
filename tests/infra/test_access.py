"""Role definitions and assignments the program declares, for the dev and prod stacks."""

from __future__ import annotations

from infra.policy import rules
from infra.roles import (
    PAYLOAD_OPERATOR,
    BuiltInRole,
    CustomRole,
    assignment_name,
    custom_role_display_name,
    custom_role_guid,
    role_guid,
)
from infra.stack_config import StackSettings
from tests.infra.pulumi_harness import APP_PRINCIPAL_ID, SUBSCRIPTION_ID, ProgramRun
from tests.infra.stacks import Stack, host_account, payload_account, stack_run


def _custom_guid(run: ProgramRun, role: CustomRole) -> str:
    return custom_role_guid(run.one("ResourceGroup").id, role)


def _expected_grants(settings: StackSettings, run: ProgramRun) -> set[tuple[str, str, str]]:
    queue = run.one("Queue", queueName="documents").id
    topic = run.one("Topic", topicName="results").id
    # The shared payload container and the evidence purpose's own: the same roles on each.
    containers = [run.one("BlobContainer", containerName=name).id for name in ("payloads", "evidence")]
    host_account_id = host_account(run).id
    app_insights = run.one("Component").id
    app = APP_PRINCIPAL_ID
    grants = {
        # Receive, send and the runtime properties target-based scaling reads (Manage claim).
        (BuiltInRole.SERVICE_BUS_DATA_OWNER.value, queue, app),
        (BuiltInRole.SERVICE_BUS_DATA_SENDER.value, topic, app),
        *{(_custom_guid(run, PAYLOAD_OPERATOR), container, app) for container in containers},
        # Signs the direct-upload grants (user delegation SAS); an account-level operation.
        (BuiltInRole.STORAGE_BLOB_DELEGATOR.value, payload_account(run).id, app),
        (BuiltInRole.STORAGE_BLOB_DATA_OWNER.value, host_account_id, app),
        (BuiltInRole.MONITORING_METRICS_PUBLISHER.value, app_insights, app),
        *{
            (BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR.value, table.id, app)
            for table in run.of_type("Table")
        },
    }
    # Producer principals hold no data-plane role (tests/infra/test_truth_writers.py): none here.
    for operator in settings.operator_principals:
        grants |= {
            (BuiltInRole.SERVICE_BUS_DATA_OWNER.value, queue, operator.object_id),
            (BuiltInRole.SERVICE_BUS_DATA_SENDER.value, topic, operator.object_id),
            *{
                (BuiltInRole.SERVICE_BUS_DATA_OWNER.value, subscription.id, operator.object_id)
                for subscription in run.of_type("Subscription")
            },
        }
    return grants


def test_operators_get_service_bus_roles_only_at_entity_scope() -> None:
    """An operator holds Service Bus roles on queues, topics and subscriptions and nothing else."""
    settings, run = stack_run("prod+producer")
    (operator,) = settings.operator_principals
    scopes = [
        a.inputs["scope"]
        for a in run.of_type("RoleAssignment")
        if a.inputs["principalId"] == operator.object_id
    ]
    assert len(scopes) == 1 + 1 + 4  # the queue, the topic, its four subscriptions
    assert all(
        "/Microsoft.ServiceBus/namespaces/" in scope and ("/queues/" in scope or "/topics/" in scope)
        for scope in scopes
    )


def test_role_assignments_are_narrow_and_deterministic(stack: Stack) -> None:
    """Every assignment is the expected role at the entity scope, named uuid5(scope, role, principal)."""
    settings, run = stack
    assignments = [r.inputs for r in run.of_type("RoleAssignment")]
    actual = {(role_guid(a["roleDefinitionId"]), a["scope"], a["principalId"]) for a in assignments}
    assert actual == _expected_grants(settings, run)
    assert len(actual) == len(assignments)
    for assignment in assignments:
        assert assignment["principalType"] == "ServicePrincipal"
        assert assignment["roleDefinitionId"].startswith(f"/subscriptions/{SUBSCRIPTION_ID}/providers/")
        assert assignment["roleAssignmentName"] == assignment_name(
            assignment["scope"], role_guid(assignment["roleDefinitionId"]), assignment["principalId"]
        )
    table_scopes = [
        a["scope"]
        for a in assignments
        if role_guid(a["roleDefinitionId"]) == BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR.value
    ]
    assert all("/tableServices/default/tables/" in scope for scope in table_scopes)
    broad_blob_roles = {
        BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR.value,
        BuiltInRole.STORAGE_BLOB_DATA_OWNER.value,
    }
    assert not [
        a
        for a in assignments
        if "/containers/" in a["scope"] and role_guid(a["roleDefinitionId"]) in broad_blob_roles
    ]


def test_payload_custom_roles_grant_exactly_the_blob_actions_the_code_calls(stack: Stack) -> None:
    """Operator (and, with producers, writer) roles: named blob data actions, resource-group assignable."""
    settings, run = stack
    group = run.one("ResourceGroup")
    definitions = {r.inputs["roleDefinitionId"]: r.inputs for r in run.of_type("RoleDefinition")}
    blobs = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
    expected = {
        PAYLOAD_OPERATOR: {
            f"{blobs}/read",
            f"{blobs}/write",
            f"{blobs}/delete",
            f"{blobs}/tags/read",
            f"{blobs}/tags/write",
            f"{blobs}/filter/action",
        },
    }
    # The writer role (infra/roles.py) is held by nobody since producers lost their data-plane roles, so
    # no stack declares it.
    assert set(definitions) == {custom_role_guid(group.id, role) for role in expected}
    for role, data_actions in expected.items():
        definition = definitions[custom_role_guid(group.id, role)]
        assert definition["roleType"] == "CustomRole"
        assert definition["roleName"] == custom_role_display_name(
            role, group.id, f"claimcheck/{settings.stack_slug}"
        )
        assert definition["scope"] == group.id
        assert definition["assignableScopes"] == [group.id]
        (permission,) = definition["permissions"]
        assert set(permission["dataActions"]) == data_actions
        assert len(permission["dataActions"]) == len(data_actions)
        assert permission["actions"] == []
        assert permission["notDataActions"] == []
        assert rules.role_definition_violations(definition) == []


def test_custom_role_guid_is_stable_per_scope_and_role() -> None:
    """The same scope and role always give the same GUID; another scope or role gives another."""
    scope = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/rg-claimcheck-dev"
    guid = custom_role_guid(scope, PAYLOAD_OPERATOR)
    assert guid == custom_role_guid(scope.upper(), PAYLOAD_OPERATOR)
    assert guid != custom_role_guid(f"{scope}2", PAYLOAD_OPERATOR)
