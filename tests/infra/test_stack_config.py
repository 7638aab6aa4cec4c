"""Stack settings: defaults, the dev/prod stack files, and one clear error per bad value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.stack_config import StackConfigError, load_settings, read_stack_config
from infra.topology import TopologyError


def test_defaults_apply_when_config_is_empty() -> None:
    """An empty config yields working defaults, the environment named after the stack."""
    settings = load_settings({}, "dev")
    assert settings.environment == "dev"
    assert settings.resource_group_name == "rg-claimcheck-dev"
    assert settings.service_bus_sku == "Standard"
    assert settings.public_network_access == "Enabled"
    assert settings.alert_emails == ()
    assert settings.producer_principals == ()
    assert settings.topology.bindings.documents_queue == "documents"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_files_load(stack: str) -> None:
    """Pulumi.dev.yaml and Pulumi.prod.yaml are valid stack config."""
    settings = load_settings(read_stack_config(stack), stack)
    assert settings.environment == stack


def test_prod_differs_from_dev() -> None:
    """The prod stack keeps data longer, is zone-redundant, with warm consumers in each zone."""
    dev = load_settings(read_stack_config("dev"), "dev")
    prod = load_settings(read_stack_config("prod"), "prod")
    assert prod.log_retention_days > dev.log_retention_days
    assert prod.blob_delete_retention_days > dev.blob_delete_retention_days
    assert prod.topology.lifecycle.delete_after_days > dev.topology.lifecycle.delete_after_days
    assert prod.storage_sku != dev.storage_sku
    assert prod.zone_redundant
    assert prod.consumer_always_ready >= 2
    assert prod.protect_stateful_resources
    assert not dev.protect_stateful_resources


def test_missing_stack_file_is_named(tmp_path: Path) -> None:
    """Asking for a stack without a file names the file that is missing."""
    with pytest.raises(StackConfigError, match=r"Pulumi\.qa\.yaml"):
        read_stack_config("qa", root=tmp_path)


_GUID = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"location": "West Europe"}, "claimcheck:location"),
        ({"environment": "Prod!"}, "claimcheck:environment"),
        ({"resourceGroupName": "rg."}, "claimcheck:resourceGroupName"),
        ({"serviceBusSku": "Basic"}, "claimcheck:serviceBusSku"),
        ({"serviceBusCapacity": 3}, "claimcheck:serviceBusCapacity"),
        ({"publicNetworkAccess": "Off"}, "claimcheck:publicNetworkAccess"),
        ({"publicNetworkAccess": "Disabled"}, "claimcheck:publicNetworkAccess"),
        ({"storageSku": "Premium_LRS"}, "claimcheck:storageSku"),
        ({"blobDeleteRetentionDays": 0}, "claimcheck:blobDeleteRetentionDays"),
        ({"containerDeleteRetentionDays": "7"}, "claimcheck:containerDeleteRetentionDays"),
        ({"logRetentionDays": 7}, "claimcheck:logRetentionDays"),
        ({"alertEmails": "ops@example.com"}, "claimcheck:alertEmails"),
        ({"alertEmails": ["not-an-email"]}, "claimcheck:alertEmails"),
        ({"backlogAlertThreshold": True}, "claimcheck:backlogAlertThreshold"),
        (
            {"producerPrincipals": [{"name": "intake", "objectId": "nope"}]},
            "claimcheck:producerPrincipals[0].objectId",
        ),
        (
            {"producerPrincipals": [{"name": "Intake", "objectId": _GUID}]},
            "claimcheck:producerPrincipals[0].name",
        ),
        ({"producerPrincipals": [{"objectId": _GUID}]}, "claimcheck:producerPrincipals[0]"),
        (
            {"producerPrincipals": [{"name": "a", "objectId": _GUID}, {"name": "a", "objectId": _GUID}]},
            "claimcheck:producerPrincipals",
        ),
        (
            {"operatorPrincipals": [{"name": "oncall", "objectId": _GUID, "appRoles": []}]},
            "claimcheck:operatorPrincipals[0]",
        ),
        (
            {"operatorPrincipals": [{"name": "oncall", "objectId": "00000000-0000-0000-0000-000000000001"}]},
            "claimcheck:operatorPrincipals[0].objectId",
        ),
        ({"owner": "a/b"}, "claimcheck:owner"),
        ({"costCenter": ""}, "claimcheck:costCenter"),
        ({"functionMaximumInstances": 5}, "claimcheck:functionMaximumInstances"),
        ({"functionInstanceMemoryMb": 1024}, "claimcheck:functionInstanceMemoryMb"),
        ({"topology": ["documents"]}, "claimcheck:topology"),
        ({"serviceBusSKU": "Standard"}, "claimcheck:serviceBusSKU"),
    ],
)
def test_bad_value_is_refused_naming_the_key(config: dict[str, Any], key: str) -> None:
    """Each malformed value raises StackConfigError naming its key."""
    with pytest.raises(StackConfigError) as raised:
        load_settings(config, "dev")
    assert key in str(raised.value)


_ZONE_REDUNDANT = {"zoneRedundant": True, "serviceBusSku": "Premium", "storageSku": "Standard_ZRS"}


@pytest.mark.parametrize("always_ready", [0, 1])
def test_zone_redundancy_refuses_fewer_than_two_always_ready(always_ready: int) -> None:
    """A zone-redundant Flex plan keeps (and bills) 2 always-ready instances per function whatever is
    configured, so a config that says fewer is refused naming the key."""
    with pytest.raises(
        StackConfigError, match=r"claimcheck:consumerAlwaysReady: \d with claimcheck:zoneRedundant"
    ):
        load_settings(_ZONE_REDUNDANT | {"consumerAlwaysReady": always_ready}, "prod")
    assert load_settings(_ZONE_REDUNDANT | {"consumerAlwaysReady": 2}, "prod").consumer_always_ready == 2
    assert load_settings({"consumerAlwaysReady": 1}, "dev").consumer_always_ready == 1  # no zones: any


@pytest.mark.parametrize(
    "address",
    ["platform-oncall@example.com", "ops@EXAMPLE.org", "a@mail.example.net", "b@ops.test", "c@host.invalid"],
)
def test_placeholder_alert_address_is_refused(address: str) -> None:
    """Reserved domains never receive mail: such an alert receiver is a placeholder, refused by key."""
    with pytest.raises(StackConfigError, match=r"claimcheck:alertEmails: .*placeholder"):
        load_settings({"alertEmails": ["oncall@contoso.com", address]}, "prod")


def test_real_alert_addresses_are_kept() -> None:
    """Addresses outside the reserved domains (including ones merely containing 'example') load."""
    emails = ["oncall@contoso.com", "ops@example-corp.com", "sre@notexample.com"]
    assert load_settings({"alertEmails": emails}, "dev").alert_emails == tuple(emails)


def test_stack_name_that_is_not_a_valid_environment_is_refused() -> None:
    """A stack name unusable in resource names must be overridden with claimcheck:environment."""
    with pytest.raises(StackConfigError, match=r"claimcheck:environment: 'my_stack' \(derived default"):
        load_settings({}, "my_stack")
    assert load_settings({"environment": "qa"}, "my_stack").environment == "qa"


def test_bad_topology_in_stack_config_is_a_topology_error() -> None:
    """A bad topology entry inside stack config surfaces as TopologyError naming the entry."""
    with pytest.raises(TopologyError, match=r"queue 'documents'\.lockDuration"):
        load_settings({"topology": {"queues": [{"name": "documents", "lockDuration": "PT1H"}]}}, "dev")
