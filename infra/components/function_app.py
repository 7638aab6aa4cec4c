"""The Function App: Flex Consumption (FC1, Linux, Python 3.11), a user-assigned managed identity,
identity-based connections only, and a deployment container read with that identity.

The identity is user-assigned and created before the app: its principal id is then known when the
app settings are written (the consumer checks it against each purpose's allowed consumers), where a
system-assigned identity's id exists only after the app does, which would make the settings depend on
the app they belong to.

Code reaches the app by Flex Consumption OneDeploy: the deploy workflow, after `pulumi up`, builds
dist/claimcheck-functions.zip (`make package`, scripts/package.py) and runs `claimcheck-ops deploy`
(scripts/ops_deploy.py), which POSTs it to the SCM site's /api/publish with an Entra token (basic-auth
publishing is off, below); the platform stores the package in the deployment container below and
reads it with the app's managed identity. No SAS URL (WEBSITE_RUN_FROM_PACKAGE) ever appears in the
settings.

Flex Consumption refuses a set of site-config properties (ARM 51021; infra/arm_rules.py lists them
with their sources), and the SDK's SiteConfigArgs fills one of them itself (netFrameworkVersion
"v4.6", pulumi/pulumi-azure-native#4168). The site config is therefore passed as a plain mapping
(SiteConfigArgsDict), which the SDK sends as written, holding only what Flex accepts; FTP is off
through the basic-auth publishing policy below, not siteConfig.ftpsState.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

import pulumi
from claimcheck.settings import INLINE_REQUEST_MAX_BYTES
from pulumi_azure_native import managedidentity, storage, web

from infra.app_settings import (
    ApiAuth,
    AppEndpoints,
    AppIdentity,
    auth_settings,
    resource_app_settings,
    resource_setting_names,
    static_app_settings,
)
from infra.components.storage import secure_storage_account
from infra.topology import Topology

DEPLOYMENT_CONTAINER = "app-package"
PYTHON_VERSION = "3.11"


# The Service Bus-triggered consumer in functions/function_app.py.
CONSUMER_FUNCTION = "consume_document"


class FunctionApp(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        host_account_logical_name: str,
        storage_sku: str,
        topology: Topology,
        environment: str,
        service_bus_fqdn: pulumi.Input[str],
        payload_blob_endpoint: pulumi.Input[str],
        payload_table_endpoint: pulumi.Input[str],
        app_insights_connection_string: pulumi.Input[str],
        maximum_instances: int,
        instance_memory_mb: int,
        auth: pulumi.Input[ApiAuth],
        consumed_purposes: tuple[str, ...],
        zone_redundant: bool,
        infrastructure_encryption: bool,
        consumer_always_ready: int,
        public_network_access: str,
        integration_subnet_id: pulumi.Input[str] | None = None,
        immutable_containers: Mapping[str, int] | None = None,
        max_inline_request_bytes: int = INLINE_REQUEST_MAX_BYTES,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:functions:FunctionApp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The host's own account (AzureWebJobsStorage and the deployment package), separate from
        # payloads so host roles at account scope never reach payload data.
        self.host_account = secure_storage_account(
            host_account_logical_name,
            resource_group_name=resource_group_name,
            location=location,
            sku=storage_sku,
            infrastructure_encryption=infrastructure_encryption,
            public_network_access=public_network_access,
            opts=child,
        )
        self.deployment_container = storage.BlobContainer(
            f"{name}-deployment",
            resource_group_name=resource_group_name,
            account_name=self.host_account.name,
            container_name=DEPLOYMENT_CONTAINER,
            public_access=storage.PublicAccess.NONE,
            opts=child,
        )
        self.plan = web.AppServicePlan(
            f"{name}-plan",
            resource_group_name=resource_group_name,
            location=location,
            kind="functionapp",
            reserved=True,  # reserved = Linux
            sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption"),
            # Instances spread over availability zones; chosen when the plan is created.
            zone_redundant=zone_redundant or None,
            opts=child,
        )
        self.identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity", resource_group_name=resource_group_name, location=location, opts=child
        )
        resolved = pulumi.Output.all(
            service_bus_fqdn,
            payload_blob_endpoint,
            payload_table_endpoint,
            self.host_account.name,
            app_insights_connection_string,
            auth,
            self.identity.client_id,
            self.identity.principal_id,
        ).apply(
            lambda values: (
                resource_app_settings(
                    AppEndpoints(
                        service_bus_fqdn=values[0],
                        payload_blob_uri=values[1],
                        payload_table_uri=values[2],
                        host_storage_account=values[3],
                        app_insights_connection_string=values[4],
                    ),
                    AppIdentity(client_id=values[6], principal_id=values[7]),
                    consumed_purposes,
                )
                | auth_settings(values[5])
            )
        )
        static = static_app_settings(topology, environment, immutable_containers, max_inline_request_bytes)
        # One name/value pair per setting, names always known: the config's values as plain strings,
        # each resource-decided value its own Output. A first preview (resource outputs unknown) then
        # shows the policy pack every name and every config value, instead of one unknown list.
        setting_pairs: list[web.NameValuePairArgsDict] = [
            web.NameValuePairArgsDict(name=key, value=value) for key, value in static.items()
        ] + [
            web.NameValuePairArgsDict(name=key, value=resolved.apply(operator.itemgetter(key)))
            for key in resource_setting_names(consumed_purposes)
        ]
        app_settings = resolved.apply(lambda values: static | values)
        self.app_settings = app_settings
        package_url = pulumi.Output.concat(
            self.host_account.primary_endpoints.apply(lambda endpoints: endpoints.blob), DEPLOYMENT_CONTAINER
        )
        self.app = web.WebApp(
            f"{name}-app",
            resource_group_name=resource_group_name,
            location=location,
            kind="functionapp,linux",
            server_farm_id=self.plan.id,
            https_only=True,
            # Flex Consumption VNet integration: outbound calls leave through the delegated subnet and
            # resolve the namespace and accounts to their private endpoints (privatelink DNS zones).
            virtual_network_subnet_id=integration_subnet_id,
            client_affinity_enabled=False,
            identity=web.ManagedServiceIdentityArgs(
                type=web.ManagedServiceIdentityType.USER_ASSIGNED, user_assigned_identities=[self.identity.id]
            ),
            # A mapping, not SiteConfigArgs: that class adds netFrameworkVersion "v4.6", which Flex
            # Consumption refuses (module docstring).
            site_config=web.SiteConfigArgsDict(
                app_settings=setting_pairs,
                min_tls_version="1.2",
                scm_min_tls_version="1.2",
                http20_enabled=True,
            ),
            function_app_config=web.FunctionAppConfigArgs(
                deployment=web.FunctionsDeploymentArgs(
                    storage=web.FunctionsDeploymentStorageArgs(
                        type="blobContainer",
                        value=package_url,
                        authentication=web.FunctionsDeploymentStorageAuthenticationArgs(
                            type="UserAssignedIdentity", user_assigned_identity_resource_id=self.identity.id
                        ),
                    )
                ),
                runtime=web.FunctionsRuntimeArgs(name="python", version=PYTHON_VERSION),
                scale_and_concurrency=web.FunctionsScaleAndConcurrencyArgs(
                    maximum_instance_count=maximum_instances,
                    instance_memory_mb=instance_memory_mb,
                    # Instances kept warm for the Service Bus consumer ("function:<name>", the name
                    # the app registers; tests/infra/test_resilience.py checks it exists).
                    always_ready=[
                        web.FunctionsAlwaysReadyConfigArgs(
                            name=f"function:{CONSUMER_FUNCTION}", instance_count=consumer_always_ready
                        )
                    ]
                    if consumer_always_ready
                    else None,
                ),
            ),
            opts=child,
        )
        # Basic-auth publishing (FTP and SCM user/password) off: deployments use Entra ID, and FTP has no
        # credential to sign in with (Flex refuses siteConfig.ftpsState, so this is how FTP is closed).
        for key, policy in (("ftp", web.WebAppFtpAllowed), ("scm", web.WebAppScmAllowed)):
            policy(
                f"{name}-{key}-basic-auth",
                resource_group_name=resource_group_name,
                name=self.app.name,
                allow=False,
                opts=child,
            )
        # Role assignments and the consumer identity: the user-assigned identity's service principal.
        self.principal_id = self.identity.principal_id
        self.register_outputs(
            {
                "name": self.app.name,
                "defaultHostName": self.app.default_host_name,
                "principalId": self.principal_id,
                "hostAccountName": self.host_account.name,
            }
        )
