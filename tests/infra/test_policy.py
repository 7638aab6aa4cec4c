"""Policy pack rules: each passes a compliant resource and flags a non-compliant one."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy.proxy import (
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
    unknown_checking_proxy,
)

from infra.policy import pack, rules
from infra.roles import PAYLOAD_OPERATOR, BuiltInRole, custom_role_guid, role_definition_id

GROUP = "/subscriptions/sub/resourceGroups/rg"
NAMESPACE = f"{GROUP}/providers/Microsoft.ServiceBus/namespaces/sb1"
ACCOUNT = f"{GROUP}/providers/Microsoft.Storage/storageAccounts/ccpay1"
CONTAINER = f"{ACCOUNT}/blobServices/default/containers/payloads"
HOST_ACCOUNT = f"{GROUP}/providers/Microsoft.Storage/storageAccounts/cchost1"
BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"

GOOD_ACCOUNT = {
    "allowSharedKeyAccess": False,
    "allowBlobPublicAccess": False,
    "enableHttpsTrafficOnly": True,
    "minimumTlsVersion": "TLS1_2",
    "allowCrossTenantReplication": False,
    "defaultToOAuthAuthentication": True,
}


def test_namespace_rule() -> None:
    """Local auth off and TLS 1.2 pass; local auth on or TLS 1.0 fail."""
    assert rules.servicebus_namespace_violations({"disableLocalAuth": True, "minimumTlsVersion": "1.2"}) == []
    relaxed = {"disableLocalAuth": False, "minimumTlsVersion": "1.0"}
    assert len(rules.servicebus_namespace_violations(relaxed)) == 2
    assert rules.servicebus_namespace_violations({"minimumTlsVersion": "1.2"}) != []


def test_sas_authorization_rules_are_refused() -> None:
    """SAS rule resources are violations; other types are not."""
    assert rules.sas_rule_violations("azure-native:servicebus:QueueAuthorizationRule") != []
    assert rules.sas_rule_violations("azure-native:servicebus:Queue") == []


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("allowSharedKeyAccess", True),
        ("allowBlobPublicAccess", True),
        ("enableHttpsTrafficOnly", False),
        ("minimumTlsVersion", "TLS1_0"),
        ("allowCrossTenantReplication", True),
        ("defaultToOAuthAuthentication", False),
    ],
)
def test_storage_account_rule(key: str, bad: object) -> None:
    """The locked-down account passes; each relaxed property is a violation naming it."""
    assert rules.storage_account_violations(GOOD_ACCOUNT) == []
    (problem,) = rules.storage_account_violations({**GOOD_ACCOUNT, key: bad})
    assert key in problem


def test_unset_shared_key_access_is_a_violation() -> None:
    """Azure's default for shared-key access is on, so leaving it unset is a violation."""
    props = {k: v for k, v in GOOD_ACCOUNT.items() if k != "allowSharedKeyAccess"}
    assert rules.storage_account_violations(props) != []


def test_container_rule() -> None:
    """Private containers pass; Blob or Container public access fails."""
    assert rules.blob_container_violations({"publicAccess": "None"}) == []
    assert rules.blob_container_violations({}) == []
    assert rules.blob_container_violations({"publicAccess": "Blob"}) != []


def _web_app(settings: dict[str, str]) -> dict[str, Any]:
    return {"siteConfig": {"appSettings": [{"name": k, "value": v} for k, v in settings.items()]}}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AzureWebJobsStorage", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc=="),
        (
            "ServiceBusConnection",
            "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=r;SharedAccessKey=k",
        ),
        ("WEBSITE_RUN_FROM_PACKAGE", "https://a.blob.core.windows.net/c/app.zip?sv=2024&sig=abc"),
        ("PAYLOAD_SAS", "SharedAccessSignature=sv=2024&sig=abc"),
        ("AzureWebJobsServiceBus", "anything"),
    ],
)
def test_app_settings_rule_flags_secrets_without_echoing_them(name: str, value: str) -> None:
    """Keys, SAS and connection strings in app settings are violations; the message never shows the value."""
    (problem,) = rules.web_app_violations(_web_app({"CLAIMCHECK_ENVIRONMENT": "dev", name: value}))
    assert name in problem
    assert value not in problem


def test_identity_based_app_settings_pass() -> None:
    """Identity-based settings, the App Insights connection string and unknown values pass."""
    settings = {
        "AzureWebJobsStorage__accountName": "cchost1",
        "ServiceBusConnection__fullyQualifiedNamespace": "sb1.servicebus.windows.net",
        "APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
        "IngestionEndpoint=https://x.in.applicationinsights.azure.com/",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "Authorization=AAD",
        "PayloadStorage__blobServiceUri": rules.UNKNOWN,
    }
    assert rules.web_app_violations(_web_app(settings)) == []


def _assignment(role: BuiltInRole, scope: str) -> tuple[str, dict[str, Any]]:
    return (
        "azure-native:authorization:RoleAssignment",
        {"scope": scope, "roleDefinitionId": role_definition_id("sub", role.value), "principalId": "p"},
    )


_HOST_APP = ("azure-native:web:WebApp", _web_app({"AzureWebJobsStorage__accountName": "cchost1"}))


@pytest.mark.parametrize(
    "assignment",
    [
        _assignment(BuiltInRole.SERVICE_BUS_DATA_RECEIVER, f"{NAMESPACE}/queues/documents"),
        _assignment(BuiltInRole.SERVICE_BUS_DATA_SENDER, f"{NAMESPACE}/topics/results"),
        _assignment(BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR, CONTAINER),
        _assignment(BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR, f"{ACCOUNT}/tableServices/default/tables/t"),
        _assignment(BuiltInRole.STORAGE_BLOB_DATA_OWNER, HOST_ACCOUNT),
        _assignment(BuiltInRole.MONITORING_METRICS_PUBLISHER, GROUP),
        # No data action (Get User Delegation Key only): the payload account is its narrowest scope.
        _assignment(BuiltInRole.STORAGE_BLOB_DELEGATOR, ACCOUNT),
        (
            "azure-native:authorization:RoleAssignment",
            {"scope": rules.UNKNOWN, "roleDefinitionId": rules.UNKNOWN},
        ),
    ],
)
def test_entity_scoped_data_roles_pass(assignment: tuple[str, dict[str, Any]]) -> None:
    """Data roles on entities (and on the Functions host account) pass; non-data roles are not judged."""
    assert rules.stack_role_violations([_HOST_APP, assignment]) == []


@pytest.mark.parametrize(
    "assignment",
    [
        _assignment(BuiltInRole.SERVICE_BUS_DATA_RECEIVER, NAMESPACE),
        _assignment(BuiltInRole.SERVICE_BUS_DATA_SENDER, GROUP),
        _assignment(BuiltInRole.STORAGE_BLOB_DATA_CONTRIBUTOR, ACCOUNT),
        _assignment(BuiltInRole.STORAGE_TABLE_DATA_CONTRIBUTOR, f"{ACCOUNT}/tableServices/default"),
        _assignment(BuiltInRole.STORAGE_BLOB_DATA_READER, "/subscriptions/sub"),
    ],
)
def test_broad_data_roles_fail(assignment: tuple[str, dict[str, Any]]) -> None:
    """Data roles on a namespace, payload account, resource group or subscription are violations."""
    ((index, problem),) = rules.stack_role_violations([_HOST_APP, assignment])
    assert index == 1
    assert assignment[1]["scope"] in problem


def test_plain_reads_the_engines_proxies() -> None:
    """pulumi_policy's proxies (Mapping/Sequence, raising on an unknown) become dicts and lists, each
    unknown the rules' UNKNOWN, so a rule reads every value it needs instead of losing the policy."""
    proxied = unknown_checking_proxy(
        {
            "siteConfig": {"appSettings": [{"name": "A", "value": UNKNOWN_STRING_VALUE}]},
            "tags": UNKNOWN_OBJECT_VALUE,
        }
    )
    assert not isinstance(proxied["siteConfig"]["appSettings"], list)
    with pytest.raises(UnknownValueError):
        proxied.get("tags")
    assert pack.plain(proxied) == {
        "siteConfig": {"appSettings": [{"name": "A", "value": rules.UNKNOWN}]},
        "tags": rules.UNKNOWN,
    }


@pytest.mark.parametrize(
    ("check", "props"),
    [
        (
            rules.servicebus_namespace_violations,
            {"disableLocalAuth": rules.UNKNOWN, "minimumTlsVersion": "1.2"},
        ),
        (rules.storage_account_violations, {**GOOD_ACCOUNT, "allowSharedKeyAccess": rules.UNKNOWN}),
        (rules.storage_account_violations, {**GOOD_ACCOUNT, "enableHttpsTrafficOnly": rules.UNKNOWN}),
        (rules.blob_container_violations, {"publicAccess": rules.UNKNOWN}),
    ],
)
def test_unknown_security_switches_are_violations(check: Any, props: dict[str, Any]) -> None:
    """A switch the preview cannot read is refused: it must be a literal the preview checks."""
    (problem,) = check(props)
    assert "literal" in problem
    assert rules.UNKNOWN not in problem


_CUSTOM_GUID = custom_role_guid(GROUP, PAYLOAD_OPERATOR)
_GOOD_ROLE = {
    "roleDefinitionId": _CUSTOM_GUID,
    "roleName": "Claim Check payload operator (rg)",
    "scope": GROUP,
    "assignableScopes": [GROUP],
    "permissions": [
        {"actions": [], "dataActions": [action.value for action in PAYLOAD_OPERATOR.data_actions]}
    ],
}


def _custom_assignment(scope: str) -> tuple[str, dict[str, Any]]:
    return (
        "azure-native:authorization:RoleAssignment",
        {"scope": scope, "roleDefinitionId": role_definition_id("sub", _CUSTOM_GUID), "principalId": "p"},
    )


def test_custom_role_definition_rule() -> None:
    """Named data actions assignable in a resource group pass; unknown values are not judged."""
    assert rules.role_definition_violations(_GOOD_ROLE) == []
    assert (
        rules.role_definition_violations(
            {
                "roleDefinitionId": rules.UNKNOWN,
                "permissions": rules.UNKNOWN,
                "assignableScopes": rules.UNKNOWN,
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"permissions": [{"dataActions": [f"{BLOBS}/*"]}]}, "wildcard"),
        ({"permissions": [{"actions": ["Microsoft.Storage/storageAccounts/listKeys/action"]}]}, "listKeys"),
        ({"assignableScopes": ["/subscriptions/sub"]}, "/subscriptions/sub"),
        ({"assignableScopes": ["/"]}, "resource group"),
    ],
)
def test_custom_role_definition_rule_flags_broad_roles(change: dict[str, Any], named: str) -> None:
    """Wildcard data actions, management actions, or subscription/root assignability are violations."""
    (problem,) = rules.role_definition_violations({**_GOOD_ROLE, **change})
    assert named in problem


def test_custom_data_role_is_held_to_entity_scope() -> None:
    """A custom role with data actions counts as a data role: on a container it passes, on the account not."""
    definition = ("azure-native:authorization:RoleDefinition", _GOOD_ROLE)
    assert rules.stack_role_violations([_HOST_APP, definition, _custom_assignment(CONTAINER)]) == []
    ((index, problem),) = rules.stack_role_violations([_HOST_APP, definition, _custom_assignment(ACCOUNT)])
    assert index == 2
    assert ACCOUNT in problem


def test_custom_data_role_the_bootstrap_defined_is_held_to_entity_scope() -> None:
    """createCustomRoles: false leaves no RoleDefinition in the stack: the role is still recognised by
    its deterministic GUID in the assignment's resource group."""
    assert rules.stack_role_violations([_HOST_APP, _custom_assignment(CONTAINER)]) == []
    ((index, problem),) = rules.stack_role_violations([_HOST_APP, _custom_assignment(ACCOUNT)])
    assert index == 1
    assert ACCOUNT in problem
