"""Network shapes under mocks: dev keeps public endpoints (Entra only), prod is private."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pulumi_policy import ResourceValidationArgs

from infra.components.network import DNS_ZONES, FLEX_DELEGATION, MONITOR_DNS_ZONES, MONITOR_GROUP
from infra.policy import pack, rules
from infra.stack_config import StackConfigError, load_settings, read_stack_config
from tests.infra.pulumi_harness import ProgramRun
from tests.infra.stacks import Stack, host_account, stack_run


def _data_services(run: ProgramRun) -> list[dict[str, Any]]:
    return [resource.inputs for resource in run.resources if resource.type in rules.DATA_SERVICE_TYPES]


def test_dev_is_public_with_entra_only_and_declares_no_network() -> None:
    settings, run = stack_run("dev")
    assert settings.private_networking is False
    assert {service["publicNetworkAccess"] for service in _data_services(run)} == {"Enabled"}
    assert not run.of_type("VirtualNetwork") + run.of_type("PrivateEndpoint") + run.of_type("PrivateZone")
    assert "virtualNetworkSubnetId" not in run.one("WebApp").inputs


def test_prod_reaches_namespace_and_accounts_only_through_private_endpoints() -> None:
    settings, run = stack_run("prod")
    assert settings.private_networking is True
    assert [service["publicNetworkAccess"] for service in _data_services(run)] == ["Disabled"] * 3
    vnet = run.one("VirtualNetwork")
    space = ipaddress.ip_network(settings.vnet_address_space)
    assert vnet.inputs["addressSpace"]["addressPrefixes"] == [str(space)]
    endpoints_subnet = run.one("Subnet", subnetName="private-endpoints")
    integration = run.one("Subnet", subnetName="functions-integration")
    assert [d["serviceName"] for d in integration.inputs["delegations"]] == [FLEX_DELEGATION]
    prefixes = [ipaddress.ip_network(s.inputs["addressPrefix"]) for s in (endpoints_subnet, integration)]
    assert all(prefix.subnet_of(space) for prefix in prefixes)  # type: ignore[arg-type]
    assert not prefixes[0].overlaps(prefixes[1])
    assert run.one("WebApp").inputs["virtualNetworkSubnetId"] == integration.id

    namespace = run.one("Namespace").id
    payloads = next(a for a in run.of_type("StorageAccount") if a.name.startswith("ccpay")).id
    host = host_account(run).id
    reached = set()
    for endpoint in run.of_type("PrivateEndpoint"):
        assert endpoint.inputs["subnet"]["id"] == endpoints_subnet.id
        (connection,) = endpoint.inputs["privateLinkServiceConnections"]
        reached.add((connection["privateLinkServiceId"], *connection["groupIds"]))
    ampls = run.one("PrivateLinkScope")
    assert reached == {
        (ampls.id, MONITOR_GROUP),
        (namespace, "namespace"),
        (payloads, "blob"),
        (payloads, "table"),
        (host, "blob"),
        (host, "queue"),
        (host, "table"),
    }

    zones = {zone.inputs["privateZoneName"]: zone.id for zone in run.of_type("PrivateZone")}
    every_zone = DNS_ZONES | MONITOR_DNS_ZONES
    assert set(zones) == set(every_zone.values())
    links = run.of_type("VirtualNetworkLink")
    assert sorted(link.inputs["privateZoneName"] for link in links) == sorted(zones)
    assert {link.inputs["virtualNetwork"]["id"] for link in links} == {vnet.id}
    assert all(link.inputs["registrationEnabled"] is False for link in links)
    groups = run.of_type("PrivateDnsZoneGroup")
    assert len(groups) == len(reached)
    registered = {}
    for group in groups:
        configs = group.inputs["privateDnsZoneConfigs"]
        for config in configs:
            assert config["privateDnsZoneId"] == zones[every_zone[config["name"]]]
        registered[group.inputs["privateEndpointName"]] = sorted(config["name"] for config in configs)
    # The AMPLS endpoint is in the five zones Azure Monitor needs (the blob zone shared with storage).
    monitor_endpoint = next(e for e in run.of_type("PrivateEndpoint") if e.name.endswith("-pe-monitor"))
    assert registered[f"{monitor_endpoint.name}-a1b2"] == sorted(
        ["monitor", "oms", "ods", "agentsvc", "blob"]
    )


def test_prod_telemetry_is_ingested_only_through_the_monitor_private_link_scope() -> None:
    """prod: Application Insights and its workspace sit in an AMPLS whose ingestion is private only,
    and refuse public ingestion themselves (queries stay open for the portal); dev has none of it."""
    _, run = stack_run("prod")
    ampls = run.one("PrivateLinkScope").inputs
    assert ampls["accessModeSettings"] == {"ingestionAccessMode": "PrivateOnly", "queryAccessMode": "Open"}
    assert ampls["location"] == "global"
    scoped = {r.inputs["linkedResourceId"] for r in run.of_type("PrivateLinkScopedResource")}
    assert scoped == {run.one("Component").id, run.one("Workspace").id}
    for kind in ("Component", "Workspace"):
        inputs = run.one(kind).inputs
        assert inputs["publicNetworkAccessForIngestion"] == "Disabled", kind
        assert inputs["publicNetworkAccessForQuery"] == "Enabled", kind

    _, dev = stack_run("dev")
    assert dev.of_type("PrivateLinkScope") == dev.of_type("PrivateLinkScopedResource") == []
    for kind in ("Component", "Workspace"):
        assert dev.one(kind).inputs["publicNetworkAccessForIngestion"] == "Enabled", kind


def test_policy_refuses_public_data_services_in_production_only(stack: Stack) -> None:
    """The shipped stacks pass; a production-tagged data service with public access is refused."""
    _, run = stack
    assert [
        problem
        for props in _data_services(run)
        for problem in rules.production_public_access_violations(props)
    ] == []
    prod_props = {"tags": {"environment": "prod"}, "publicNetworkAccess": "Enabled"}
    (problem,) = rules.production_public_access_violations(prod_props)
    assert "publicNetworkAccess: Disabled" in problem
    assert rules.production_public_access_violations({**prod_props, "tags": {"environment": "dev"}}) == []
    # A value a preview cannot know is refused too: the switch must be a literal the preview checks.
    unknown = {**prod_props, "publicNetworkAccess": rules.UNKNOWN}
    (problem,) = rules.production_public_access_violations(unknown)
    assert "literal" in problem
    reported: list[str] = []
    for resource_type in (*rules.DATA_SERVICE_TYPES, "azure-native:servicebus:Queue"):
        pack._production_data_services_private(
            cast(ResourceValidationArgs, SimpleNamespace(resource_type=resource_type, props=prod_props)),
            lambda message, _urn: reported.append(message),
        )
    assert len(reported) == len(rules.DATA_SERVICE_TYPES)


@pytest.mark.parametrize(
    ("stack", "change", "key"),
    [
        ("prod", {"serviceBusSku": "Standard", "zoneRedundant": False}, "claimcheck:privateNetworking"),
        ("prod", {"publicNetworkAccess": "Enabled"}, "claimcheck:publicNetworkAccess"),
        ("dev", {"publicNetworkAccess": "Disabled"}, "claimcheck:publicNetworkAccess"),
        ("prod", {"vnetAddressSpace": "10.60.0.0/24"}, "claimcheck:vnetAddressSpace"),
        ("prod", {"vnetAddressSpace": "8.8.0.0/16"}, "claimcheck:vnetAddressSpace"),
        ("prod", {"vnetAddressSpace": "10.60.0.0/33"}, "claimcheck:vnetAddressSpace"),
    ],
)
def test_contradictory_network_settings_are_refused_naming_the_key(
    stack: str, change: dict[str, Any], key: str
) -> None:
    with pytest.raises(StackConfigError) as raised:
        load_settings(read_stack_config(stack) | change, stack)
    assert str(raised.value).startswith(key)
