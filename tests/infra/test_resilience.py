"""Zone redundancy, infrastructure encryption and always-ready instances, for the dev and prod stacks."""

from __future__ import annotations

from typing import Any

import pytest

from infra.bindings import functions_metadata
from infra.components.function_app import CONSUMER_FUNCTION
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import import_app
from tests.infra.stacks import Stack


def test_zone_redundancy_follows_the_setting(stack: Stack) -> None:
    """Prod: zone-redundant Premium namespace, Flex plan and ZRS storage; dev: none of it."""
    settings, run = stack
    namespace, plan = run.one("Namespace").inputs, run.one("AppServicePlan").inputs
    assert namespace.get("zoneRedundant", False) is settings.zone_redundant
    assert plan.get("zoneRedundant", False) is settings.zone_redundant
    if settings.zone_redundant:
        assert {a.inputs["sku"]["name"] for a in run.of_type("StorageAccount")} <= {
            "Standard_ZRS",
            "Standard_GZRS",
            "Standard_RAGZRS",
        }
    assert settings.zone_redundant is (settings.environment == "prod")


def test_both_accounts_require_infrastructure_encryption(stack: Stack) -> None:
    settings, run = stack
    for account in run.of_type("StorageAccount"):
        encryption = account.inputs["encryption"]
        assert settings.require_infrastructure_encryption is True
        assert encryption["requireInfrastructureEncryption"] is True
        assert encryption["keySource"] == "Microsoft.Storage"
        assert {service["keyType"] for service in encryption["services"].values()} == {"Account"}


def test_always_ready_names_the_apps_service_bus_consumer(stack: Stack) -> None:
    """The always-ready entry is `function:<name>` of the function the app triggers from Service Bus."""
    settings, run = stack
    scale = run.one("WebApp").inputs["functionAppConfig"]["scaleAndConcurrency"]
    expected = (
        [{"name": f"function:{CONSUMER_FUNCTION}", "instanceCount": settings.consumer_always_ready}]
        if settings.consumer_always_ready
        else None
    )
    assert scale.get("alwaysReady") == expected
    consumer = next(f for f in functions_metadata(import_app(DEFAULT_APP)) if f.name == CONSUMER_FUNCTION)
    assert [binding["type"] for binding in consumer.bindings] == ["serviceBusTrigger"]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (
            {"zoneRedundant": True, "serviceBusSku": "Standard", "privateNetworking": False},
            "claimcheck:zoneRedundant",
        ),
        ({"zoneRedundant": True, "storageSku": "Standard_LRS"}, "claimcheck:zoneRedundant"),
        ({"consumerAlwaysReady": 41, "functionMaximumInstances": 40}, "claimcheck:consumerAlwaysReady"),
    ],
)
def test_contradictory_settings_are_refused_naming_the_key(change: dict[str, Any], key: str) -> None:
    config = read_stack_config("prod") | change
    with pytest.raises(StackConfigError) as raised:
        load_settings(config, "prod")
    assert str(raised.value).startswith(key)
