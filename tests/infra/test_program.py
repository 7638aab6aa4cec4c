"""The Pulumi program run offline under mocks, for the dev and prod stack config."""

from __future__ import annotations

import importlib.util
import re
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.settings import PROVISIONAL_TAG_NAME, PROVISIONAL_TAG_VALUE, Settings

from infra import entrypoint
from infra.policy import rules
from infra.stack_config import REPO_ROOT, StackConfigError, load_settings, read_stack_config
from tests.infra.pulumi_harness import APP_IDENTITY_CLIENT_ID, APP_PRINCIPAL_ID, ProgramRun, run_program
from tests.infra.stacks import CONSUMED_PURPOSES, Stack, host_account, stack_run


def test_namespace_is_entra_only_with_tls12(stack: Stack) -> None:
    """The namespace disables SAS, requires TLS 1.2, uses the stack's SKU and network access; no SAS rules."""
    settings, run = stack
    namespace = run.one("Namespace").inputs
    assert namespace["disableLocalAuth"] is True
    assert namespace["minimumTlsVersion"] == "1.2"
    assert namespace["publicNetworkAccess"] == settings.public_network_access
    assert namespace["sku"]["name"] == settings.service_bus_sku
    assert not [r for r in run.resources if r.type.endswith("AuthorizationRule")]


def test_documents_queue_has_sessions_and_dead_lettering(stack: Stack) -> None:
    """`documents` requires sessions, 5 deliveries, a 1-minute lock, dead-letter on expiry, dedup."""
    _, run = stack
    queue = run.one("Queue", queueName="documents").inputs
    assert queue["requiresSession"] is True
    assert queue["maxDeliveryCount"] == 5
    assert queue["lockDuration"] == "PT1M"
    assert queue["deadLetteringOnMessageExpiration"] is True
    assert queue["requiresDuplicateDetection"] is True
    assert queue["duplicateDetectionHistoryTimeWindow"] == "PT10M"
    assert run.one("Topic", topicName="results").inputs["requiresDuplicateDetection"] is True


def test_subscriptions_rules_and_default_rule_removal(stack: Stack) -> None:
    """Filtered subscriptions get their SQL/correlation rule and a neutralised $Default; audit's takes all."""
    _, run = stack
    subscriptions = {r.inputs["subscriptionName"]: r.inputs for r in run.of_type("Subscription")}
    assert set(subscriptions) == {"audit", "notifications", "review", "contracts"}
    assert all(sub["deadLetteringOnFilterEvaluationExceptions"] is True for sub in subscriptions.values())
    rules_by_subscription = {r.inputs["subscriptionName"]: r.inputs for r in run.of_type("Rule")}
    assert rules_by_subscription["notifications"]["sqlFilter"]["sqlExpression"] == "priority = 'high'"
    assert rules_by_subscription["notifications"]["filterType"] == "SqlFilter"
    assert rules_by_subscription["review"]["sqlFilter"]["sqlExpression"] == "review_required = TRUE"
    contracts = rules_by_subscription["contracts"]
    assert contracts["filterType"] == "CorrelationFilter"
    assert contracts["correlationFilter"]["properties"] == {"document_type": "contract"}
    defaults = {r.inputs["subscriptionName"]: r.inputs for r in run.of_type("DefaultRule")}
    assert set(defaults) == set(subscriptions)
    assert {sub: rule["sqlFilter"]["sqlExpression"] for sub, rule in defaults.items()} == {
        "audit": "1=1",
        "notifications": "1=0",
        "review": "1=0",
        "contracts": "1=0",
    }


def test_storage_accounts_are_locked_down(stack: Stack) -> None:
    """Both accounts: no shared key, no public blobs, HTTPS, TLS 1.2, no cross-tenant replication, OAuth."""
    settings, run = stack
    accounts = run.of_type("StorageAccount")
    assert len(accounts) == 2
    for account in accounts:
        props = account.inputs
        assert props["allowSharedKeyAccess"] is False
        assert props["allowBlobPublicAccess"] is False
        assert props["enableHttpsTrafficOnly"] is True
        assert props["minimumTlsVersion"] == "TLS1_2"
        assert props["allowCrossTenantReplication"] is False
        assert props["defaultToOAuthAuthentication"] is True
        assert props["sku"]["name"] == settings.storage_sku
    assert all(c.inputs["publicAccess"] == "None" for c in run.of_type("BlobContainer"))
    blob_service = run.one("BlobServiceProperties").inputs
    assert blob_service["isVersioningEnabled"] is True
    assert blob_service["deleteRetentionPolicy"] == {
        "enabled": True,
        "days": settings.blob_delete_retention_days,
    }
    assert blob_service["containerDeleteRetentionPolicy"] == {
        "enabled": True,
        "days": settings.container_delete_retention_days,
    }
    tables = sorted(t.inputs["tableName"] for t in run.of_type("Table"))
    assert tables == sorted(settings.topology.tables.all())


def test_lifecycle_rules_follow_thestack_run(stack: Stack) -> None:
    """Provisional orphans, payload tiering/expiry and old versions are governed per the stack's days."""
    settings, run = stack
    lifecycle = settings.topology.lifecycle
    declared = run.one("ManagementPolicy").inputs["policy"]["rules"]
    policy_rules = {rule["name"]: rule["definition"] for rule in declared}
    provisional = policy_rules["deleteProvisionalOrphans"]
    assert provisional["filters"]["blobIndexMatch"] == [
        {"name": PROVISIONAL_TAG_NAME, "op": "==", "value": PROVISIONAL_TAG_VALUE}
    ]
    # Every payload container whose objects are not locked (prod locks evidence: its own, later rule).
    unlocked = [
        f"{name}/" for name in ("payloads", "evidence") if name not in settings.immutable_containers()
    ]
    assert provisional["filters"]["prefixMatch"] == unlocked
    assert provisional["actions"]["baseBlob"]["delete"] == {
        "daysAfterModificationGreaterThan": lifecycle.provisional_grace_days
    }
    uploads = policy_rules["deleteUncommittedUploads"]
    assert uploads["filters"]["prefixMatch"] == ["payloads/uploads/"]
    assert uploads["actions"]["baseBlob"]["delete"] == {
        "daysAfterModificationGreaterThan": lifecycle.provisional_grace_days
    }
    aging = policy_rules["tierAndExpirePayloads"]["actions"]["baseBlob"]
    assert aging["tierToCool"] == {"daysAfterModificationGreaterThan": lifecycle.cool_after_days}
    assert aging["tierToCold"] == {"daysAfterModificationGreaterThan": lifecycle.cold_after_days}
    assert aging["delete"] == {"daysAfterModificationGreaterThan": lifecycle.delete_after_days}
    versions = policy_rules["deleteOldVersions"]["actions"]["version"]["delete"]
    assert versions == {"daysAfterCreationGreaterThan": lifecycle.old_versions_delete_after_days}


def _app_settings(run: ProgramRun) -> dict[str, str]:
    pairs = run.one("WebApp").inputs["siteConfig"]["appSettings"]
    return {pair["name"]: pair["value"] for pair in pairs}


def test_function_app_is_flex_consumption_with_managed_identity(stack: Stack) -> None:
    """FC1 Linux plan, Python 3.11, user-assigned identity, deployment container read with that identity."""
    settings, run = stack
    plan = run.one("AppServicePlan").inputs
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["reserved"] is True
    app = run.one("WebApp").inputs
    assert app["kind"] == "functionapp,linux"
    assert app["httpsOnly"] is True
    identity = run.one("UserAssignedIdentity")
    assert app["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [identity.id]}
    config = app["functionAppConfig"]
    assert config["runtime"] == {"name": "python", "version": "3.11"}
    storage = config["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {
        "type": "UserAssignedIdentity",
        "userAssignedIdentityResourceId": identity.id,
    }
    assert storage["value"].endswith(".blob.core.windows.net/app-package")
    assert config["scaleAndConcurrency"]["maximumInstanceCount"] == settings.function_maximum_instances
    basic_auth = run.of_type("WebAppFtpAllowed") + run.of_type("WebAppScmAllowed")
    assert {policy.inputs["allow"] for policy in basic_auth} == {False}
    assert run.one("Component").inputs["disableLocalAuth"] is True


def test_app_settings_are_identity_based_and_secret_free(stack: Stack) -> None:
    """App settings are identity-based connections plus CLAIMCHECK_* names that Settings.from_env reads."""
    settings, run = stack
    app_settings = _app_settings(run)
    host = host_account(run)
    assert app_settings["AzureWebJobsStorage__accountName"] == host.id.rsplit("/", 1)[-1]
    assert app_settings["ServiceBusConnection__fullyQualifiedNamespace"].endswith(".servicebus.windows.net")
    assert app_settings["PayloadStorage__blobServiceUri"].startswith("https://ccpay")
    assert app_settings["PayloadStorage__tableServiceUri"].endswith(".table.core.windows.net")
    assert app_settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == (
        f"ClientId={APP_IDENTITY_CLIENT_ID};Authorization=AAD"
    )
    assert rules.app_settings_violations(app_settings) == []
    assert not [name for name in app_settings if name in ("AzureWebJobsStorage", "WEBSITE_RUN_FROM_PACKAGE")]
    app = Settings.from_env(app_settings)
    assert app.environment == settings.environment
    assert (app.documents_queue, app.results_topic, app.payload_container) == (
        "documents",
        "results",
        "payloads",
    )
    assert (
        app.registry_table,
        app.idempotency_table,
        app.work_items_table,
        app.audit_table,
        app.results_table,
    ) == settings.topology.tables.all()
    assert app.max_delivery_count == settings.topology.queue("documents").max_delivery_count


def test_every_identity_connection_names_the_user_assigned_identity(stack: Stack) -> None:
    """A user-assigned identity is never the default: each identity-based connection the host resolves
    (`<NAME>__fullyQualifiedNamespace`, `__accountName`, `__blobServiceUri`...) names it by client id,
    and DefaultAzureCredential in the adapters gets it from AZURE_CLIENT_ID."""
    _, run = stack
    app_settings = _app_settings(run)
    connections = {name.split("__", 1)[0] for name in app_settings if "__" in name}
    assert connections == {"AzureWebJobsStorage", "ServiceBusConnection", "PayloadStorage"}
    for connection in connections:
        assert app_settings[f"{connection}__credential"] == "managedidentity"
        assert app_settings[f"{connection}__clientId"] == APP_IDENTITY_CLIENT_ID
    assert app_settings["AZURE_CLIENT_ID"] == APP_IDENTITY_CLIENT_ID


def test_consumer_identity_is_the_apps_managed_identity(stack: Stack) -> None:
    """The consumer's identity setting is the identity's principal id (the one the role assignments
    name), and every purpose the stack consumes allows exactly that consumer (all of them by default)."""
    settings, run = stack
    app = Settings.from_env(_app_settings(run))
    assert app.consumer_identity == APP_PRINCIPAL_ID
    assert set(app.purpose_consumers) == set(DEFAULT_PURPOSES)
    assert {
        purpose for purpose, consumers in app.purpose_consumers.items() if consumers == {APP_PRINCIPAL_ID}
    } == set(settings.consumed_purposes)
    assert {
        assignment.inputs["principalId"]
        for assignment in run.of_type("RoleAssignment")
        if assignment.name.split("-access-", 1)[-1].startswith("app-")
    } == {APP_PRINCIPAL_ID}


def test_consumed_purposes_from_the_stack_config_bound_the_consumer() -> None:
    """claimcheck:consumedPurposes lists what this stack consumes: the others get no allowed consumer."""
    app = Settings.from_env(_app_settings(stack_run("prod+producer")[1]))
    assert app.purpose_consumers == {
        purpose: frozenset({APP_PRINCIPAL_ID}) if purpose in CONSUMED_PURPOSES else frozenset()
        for purpose in DEFAULT_PURPOSES
    }
    for bad in ([], ["gossip"], ["contract-review", "contract-review"], "contract-review"):
        with pytest.raises(StackConfigError, match="claimcheck:consumedPurposes"):
            load_settings({"consumedPurposes": bad}, "dev")


# protobuf that the Python worker bundles for Python 3.8-3.12 ("protobuf~=4.25.3" in
# azure-functions-python-worker's pyproject.toml); 3.13+ runs a worker that isolates by itself.
WORKER_PROTOBUF_MAJOR = 4


def _settlement_stub_gencode_major() -> int:
    """Major protobuf version the Service Bus extension's settlement stub was generated with."""
    spec = importlib.util.find_spec("azurefunctions.extensions.bindings.protos.settlement_pb2")
    assert spec is not None
    assert spec.origin is not None
    found = re.search(r"^# Protobuf Python Version: (\d+)\.", Path(spec.origin).read_text(), re.MULTILINE)
    assert found is not None, "settlement_pb2.py no longer states its protobuf gencode version"
    return int(found.group(1))


def test_python_worker_loads_the_apps_protobuf_for_settlement(stack: Stack) -> None:
    """On Python < 3.13 the worker must load the app's protobuf: the settlement stub needs a newer one."""
    _, run = stack
    app_settings = _app_settings(run)
    version = run.one("WebApp").inputs["functionAppConfig"]["runtime"]["version"]
    assert tuple(int(part) for part in version.split(".")) < (3, 13), (
        "Python 3.13+ isolates worker dependencies itself: drop PYTHON_ISOLATE_WORKER_DEPENDENCIES"
    )
    assert _settlement_stub_gencode_major() > WORKER_PROTOBUF_MAJOR
    assert app_settings["PYTHON_ISOLATE_WORKER_DEPENDENCIES"] == "1"
    assert "PYTHON_ENABLE_INIT_INDEXING" not in app_settings  # HTTP streaming only; not used here


def test_every_resource_passes_the_policy_pack(stack: Stack) -> None:
    """The policy pack's rules find no violation in the stack the program declares."""
    _, run = stack
    for resource in run.resources:
        check = rules.RESOURCE_CHECKS.get(resource.type)
        assert check is None or check(resource.inputs) == [], resource.name
        assert rules.sas_rule_violations(resource.type) == []
    assert rules.stack_role_violations((r.type, r.inputs) for r in run.resources) == []


def test_outputs_name_endpoints_entities_and_principals(stack: Stack) -> None:
    """Stack outputs give the namespace FQDN, entity names, endpoints, app name/host and principal ids."""
    settings, run = stack
    outputs: dict[str, Any] = run.outputs
    assert outputs["serviceBusFqdn"] == f"{outputs['serviceBusNamespace']}.servicebus.windows.net"
    assert outputs["documentsQueue"] == "documents"
    assert outputs["resultsTopic"] == "results"
    assert outputs["subscriptions"] == {"results": ["audit", "notifications", "review", "contracts"]}
    assert (
        outputs["payloadBlobEndpoint"] == f"https://{outputs['payloadStorageAccount']}.blob.core.windows.net/"
    )
    assert outputs["tables"] == list(settings.topology.tables.all())
    assert outputs["functionAppHostName"] == f"{outputs['functionAppName']}.azurewebsites.net"
    assert outputs["functionAppId"] == run.one("WebApp").id  # what `claimcheck-ops deploy --app-id` takes
    assert outputs["functionAppPrincipalId"] == APP_PRINCIPAL_ID
    assert outputs["producerPrincipalIds"] == [p.object_id for p in settings.producer_principals]
    assert outputs["resourceGroupName"] == settings.resource_group_name


def test_pulumi_entry_point_reads_stack_config() -> None:
    """infra/__main__.py, run as Pulumi runs it, reads claimcheck:* config and declares the prod stack."""
    config = read_stack_config("prod")
    run = run_program(
        lambda: runpy.run_path(str(REPO_ROOT / "infra" / "__main__.py")) and None, stack="prod", config=config
    )
    assert run.one("Namespace").inputs["sku"]["name"] == "Premium"
    assert run.one("Workspace").inputs["retentionInDays"] == 90
    assert len(run.resources) == len(stack_run("prod")[1].resources)


def test_components_use_claimcheck_type_tokens() -> None:
    """Each concern is a ComponentResource registered under a `claimcheck:<area>:<Name>` token."""
    _, run = stack_run("dev")
    components = {resource.type for resource in run.resources if resource.type.startswith("claimcheck:")}
    assert components == {
        "claimcheck:messaging:Messaging",
        "claimcheck:storage:PayloadStorage",
        "claimcheck:functions:FunctionApp",
        "claimcheck:access:Access",
        "claimcheck:observability:Monitoring",
        "claimcheck:observability:Alerts",
        "claimcheck:identity:ApiIdentity",
    }


def test_entry_point_turns_bad_config_into_a_run_error() -> None:
    """A malformed key stops the program with a RunError naming the key, before any resource."""
    with pytest.raises(pulumi.RunError, match="claimcheck:logRetentionDays"):
        run_program(entrypoint.run, stack="dev", config={"logRetentionDays": 7})
