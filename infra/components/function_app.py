"""The Function App: Flex Consumption (FC1, Linux, Python 3.11), system-assigned identity,
identity-based connections only, and a deployment container read with that identity.

Code reaches the app by Flex Consumption "one deploy": the CI pipeline, after `pulumi up`, zips
functions/ and runs `az functionapp deployment source config-zip` (or the Azure/functions-action);
the platform stores the package in the deployment container below and reads it with the app's
managed identity. No SAS URL (WEBSITE_RUN_FROM_PACKAGE) ever appears in the settings.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import storage, web

from infra.app_settings import ApiAuth, AppEndpoints, auth_settings, build_app_settings
from infra.components.storage import secure_storage_account
from infra.topology import Topology

DEPLOYMENT_CONTAINER = "app-package"
PYTHON_VERSION = "3.11"


class FunctionApp(pulumi.ComponentResource):
    def __init__(self, name: str, *, resource_group_name: pulumi.Input[str], location: str,
                 host_account_logical_name: str, storage_sku: str, topology: Topology, environment: str,
                 service_bus_fqdn: pulumi.Input[str], payload_blob_endpoint: pulumi.Input[str],
                 payload_table_endpoint: pulumi.Input[str],
                 app_insights_connection_string: pulumi.Input[str], maximum_instances: int,
                 instance_memory_mb: int, auth: pulumi.Input[ApiAuth],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("claimcheck:functions:FunctionApp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The host's own account (AzureWebJobsStorage and the deployment package), separate from
        # payloads so host roles at account scope never reach payload data.
        self.host_account = secure_storage_account(host_account_logical_name,
                                                   resource_group_name=resource_group_name,
                                                   location=location, sku=storage_sku, opts=child)
        self.deployment_container = storage.BlobContainer(
            f"{name}-deployment", resource_group_name=resource_group_name,
            account_name=self.host_account.name, container_name=DEPLOYMENT_CONTAINER,
            public_access=storage.PublicAccess.NONE, opts=child)
        self.plan = web.AppServicePlan(
            f"{name}-plan", resource_group_name=resource_group_name, location=location,
            kind="functionapp", reserved=True,  # reserved = Linux
            sku=web.SkuDescriptionArgs(name="FC1", tier="FlexConsumption"), opts=child)
        app_settings = pulumi.Output.all(
            service_bus_fqdn, payload_blob_endpoint, payload_table_endpoint, self.host_account.name,
            app_insights_connection_string, auth,
        ).apply(lambda values: build_app_settings(
            AppEndpoints(service_bus_fqdn=values[0], payload_blob_uri=values[1], payload_table_uri=values[2],
                         host_storage_account=values[3], app_insights_connection_string=values[4]),
            topology, environment) | auth_settings(values[5]))
        self.app_settings = app_settings
        package_url = pulumi.Output.concat(
            self.host_account.primary_endpoints.apply(lambda endpoints: endpoints.blob), DEPLOYMENT_CONTAINER)
        self.app = web.WebApp(
            f"{name}-app",
            resource_group_name=resource_group_name,
            location=location,
            kind="functionapp,linux",
            server_farm_id=self.plan.id,
            https_only=True,
            client_affinity_enabled=False,
            identity=web.ManagedServiceIdentityArgs(type=web.ManagedServiceIdentityType.SYSTEM_ASSIGNED),
            site_config=web.SiteConfigArgs(
                app_settings=app_settings.apply(
                    lambda values: [web.NameValuePairArgs(name=key, value=value)
                                    for key, value in values.items()]),
                min_tls_version="1.2",
                scm_min_tls_version="1.2",
                ftps_state=web.FtpsState.DISABLED,
                http20_enabled=True,
            ),
            function_app_config=web.FunctionAppConfigArgs(
                deployment=web.FunctionsDeploymentArgs(storage=web.FunctionsDeploymentStorageArgs(
                    type="blobContainer",
                    value=package_url,
                    authentication=web.FunctionsDeploymentStorageAuthenticationArgs(
                        type="SystemAssignedIdentity"),
                )),
                runtime=web.FunctionsRuntimeArgs(name="python", version=PYTHON_VERSION),
                scale_and_concurrency=web.FunctionsScaleAndConcurrencyArgs(
                    maximum_instance_count=maximum_instances, instance_memory_mb=instance_memory_mb),
            ),
            opts=child,
        )
        # Basic-auth publishing (FTP and SCM user/password) off: deployments use Entra ID.
        for key, policy in (("ftp", web.WebAppFtpAllowed), ("scm", web.WebAppScmAllowed)):
            policy(f"{name}-{key}-basic-auth", resource_group_name=resource_group_name, name=self.app.name,
                   allow=False, opts=child)
        self.principal_id = self.app.identity.apply(_principal_id)
        self.register_outputs({
            "name": self.app.name,
            "defaultHostName": self.app.default_host_name,
            "principalId": self.principal_id,
            "hostAccountName": self.host_account.name,
        })


def _principal_id(identity: web.outputs.ManagedServiceIdentityResponse | None) -> str:
    if identity is None or not identity.principal_id:
        raise ValueError("the Function App has no system-assigned identity; its role assignments need one")
    principal: str = identity.principal_id
    return principal
