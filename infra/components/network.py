"""Private networking (claimcheck:privateNetworking): a VNet, a subnet for private endpoints and one
delegated to Flex Consumption VNet integration, private endpoints for the namespace and the storage
services each account serves, and the privatelink DNS zones linked to the VNet so that the app's
public host names (<ns>.servicebus.windows.net, <account>.blob.core.windows.net, ...) resolve to the
endpoints' private addresses from inside it. docs/deploy.md, "Private networking", has the picture.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import monitor, network, privatedns

# Flex Consumption integrates with a subnet delegated to Microsoft.App/environments (not
# Microsoft.Web/serverFarms as other plans); Azure-Samples' Flex VNet templates use the same.
FLEX_DELEGATION = "Microsoft.App/environments"
# Public cloud privatelink zones per private endpoint group id.
DNS_ZONES = {
    "namespace": "privatelink.servicebus.windows.net",
    "blob": "privatelink.blob.core.windows.net",
    "table": "privatelink.table.core.windows.net",
    "queue": "privatelink.queue.core.windows.net",
}
# An Azure Monitor Private Link Scope (AMPLS) is reached through one private endpoint, group id
# "azuremonitor", registered in five zones: Microsoft's "Use Azure Private Link to connect networks to
# Azure Monitor" (azure-docs articles/azure-monitor/logs/private-link-security.md, "Reviewing your
# endpoint's DNS settings") lists monitor (global endpoints, Application Insights ingestion `in.ai`, live
# metrics, API), oms and ods (workspace-specific), agentsvc (agents) and blob (agent solution packs; the
# zone the storage endpoints already use).
MONITOR_GROUP = "azuremonitor"
MONITOR_DNS_ZONES = {
    "monitor": "privatelink.monitor.azure.com",
    "oms": "privatelink.oms.opinsights.azure.com",
    "ods": "privatelink.ods.opinsights.azure.com",
    "agentsvc": "privatelink.agentsvc.azure-automation.net",
}
MONITOR_ZONE_KEYS = (*MONITOR_DNS_ZONES, "blob")


@dataclass(frozen=True)
class PrivateTarget:
    """A resource reached through private endpoints: one per group id (sub-resource) it serves."""

    key: str  # logical name part, e.g. "servicebus", "payloads"
    resource_id: pulumi.Input[str]
    group_ids: tuple[str, ...]


def subnet_prefixes(address_space: str) -> tuple[str, str]:
    """The private-endpoint and integration subnets: the first two /24s of the VNet's address space."""
    first, second = list(ipaddress.ip_network(address_space).subnets(new_prefix=24))[:2]
    return str(first), str(second)


class PrivateNetwork(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        address_space: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:network:PrivateNetwork", name, None, opts)
        self._child = pulumi.ResourceOptions(parent=self)
        self._name, self._resource_group_name, self._location = name, resource_group_name, location
        endpoints_prefix, integration_prefix = subnet_prefixes(address_space)
        # Subnets are their own resources; the VNet ignores its `subnets` property so an update of
        # the VNet never removes them.
        self.vnet = network.VirtualNetwork(
            f"{name}-vnet",
            resource_group_name=resource_group_name,
            location=location,
            address_space=network.AddressSpaceArgs(address_prefixes=[address_space]),
            opts=self._child.merge(pulumi.ResourceOptions(ignore_changes=["subnets"])),
        )
        self.endpoints_subnet = network.Subnet(
            f"{name}-snet-endpoints",
            resource_group_name=resource_group_name,
            virtual_network_name=self.vnet.name,
            subnet_name="private-endpoints",
            address_prefix=endpoints_prefix,
            private_endpoint_network_policies=network.VirtualNetworkPrivateEndpointNetworkPolicies.DISABLED,
            opts=self._child,
        )
        self.integration_subnet = network.Subnet(
            f"{name}-snet-functions",
            resource_group_name=resource_group_name,
            virtual_network_name=self.vnet.name,
            subnet_name="functions-integration",
            address_prefix=integration_prefix,
            delegations=[network.DelegationArgs(name="flex-consumption", service_name=FLEX_DELEGATION)],
            # One subnet operation at a time on a VNet: Azure refuses concurrent subnet writes.
            opts=self._child.merge(pulumi.ResourceOptions(depends_on=[self.endpoints_subnet])),
        )
        self.zones: dict[str, privatedns.PrivateZone] = {}
        for group, zone_name in (DNS_ZONES | MONITOR_DNS_ZONES).items():
            zone = privatedns.PrivateZone(
                f"{name}-dns-{group}",
                resource_group_name=resource_group_name,
                location="global",
                private_zone_name=zone_name,
                opts=self._child,
            )
            privatedns.VirtualNetworkLink(
                f"{name}-dns-{group}-link",
                resource_group_name=resource_group_name,
                location="global",
                private_zone_name=zone.name,
                registration_enabled=False,
                virtual_network=privatedns.SubResourceArgs(id=self.vnet.id),
                opts=self._child,
            )
            self.zones[group] = zone
        self.endpoints: dict[str, network.PrivateEndpoint] = {}
        self.register_outputs({"vnetId": self.vnet.id, "integrationSubnetId": self.integration_subnet.id})

    def link_monitoring(self, resource_ids: dict[str, pulumi.Input[str]]) -> monitor.PrivateLinkScope:
        """Telemetry over the VNet: an AMPLS holding `resource_ids` (key -> the Application Insights
        component and its workspace: both, or the workspace would stay reachable publicly), ingestion
        only through private endpoints (queries stay open for the portal), and the scope's endpoint in
        the five zones Azure Monitor needs."""
        # Preview API version, why: infra/api_versions.py.
        scope = monitor.PrivateLinkScope(
            f"{self._name}-ampls",
            resource_group_name=self._resource_group_name,
            location="global",
            access_mode_settings=monitor.AccessModeSettingsArgs(
                ingestion_access_mode=monitor.AccessMode.PRIVATE_ONLY,
                query_access_mode=monitor.AccessMode.OPEN,
            ),
            opts=self._child,
        )
        for key, resource_id in resource_ids.items():
            monitor.PrivateLinkScopedResource(
                f"{self._name}-ampls-{key}",
                resource_group_name=self._resource_group_name,
                scope_name=scope.name,
                name=key,
                linked_resource_id=resource_id,
                opts=self._child,
            )
        self._endpoint("monitor", scope.id, MONITOR_GROUP, MONITOR_ZONE_KEYS)
        return scope

    def connect(self, target: PrivateTarget) -> None:
        """One private endpoint per group id of `target`, registered in that group's DNS zone."""
        for group in target.group_ids:
            self._endpoint(f"{target.key}-{group}", target.resource_id, group, (group,))

    def _endpoint(
        self, key: str, resource_id: pulumi.Input[str], group: str, zones: tuple[str, ...]
    ) -> network.PrivateEndpoint:
        """A private endpoint to `group` of `resource_id`, registered in `zones` (keys of self.zones)."""
        endpoint = network.PrivateEndpoint(
            f"{self._name}-pe-{key}",
            resource_group_name=self._resource_group_name,
            location=self._location,
            subnet=network.SubnetArgs(id=self.endpoints_subnet.id),
            private_link_service_connections=[
                network.PrivateLinkServiceConnectionArgs(
                    name=key, private_link_service_id=resource_id, group_ids=[group]
                )
            ],
            opts=self._child,
        )
        network.PrivateDnsZoneGroup(
            f"{self._name}-pe-{key}-dns",
            resource_group_name=self._resource_group_name,
            private_endpoint_name=endpoint.name,
            private_dns_zone_group_name="default",
            private_dns_zone_configs=[
                network.PrivateDnsZoneConfigArgs(name=zone, private_dns_zone_id=self.zones[zone].id)
                for zone in zones
            ],
            opts=self._child,
        )
        self.endpoints[key] = endpoint
        return endpoint
