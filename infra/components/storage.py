"""Payload storage: a locked-down account (Entra only), private containers, soft delete, versioning,
the lifecycle backstop, and the registry/idempotency/work-item/audit tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from claimcheck.policy import DEFAULT_PURPOSES
from claimcheck.uploads import STAGING_PREFIX
from pulumi_azure_native import storage

from infra.encryption import CustomerManagedKey
from infra.policy.rules import PURPOSES_METADATA
from infra.topology import LifecycleSpec, Topology


def secure_storage_account(
    logical_name: str,
    *,
    resource_group_name: pulumi.Input[str],
    location: str,
    sku: str,
    infrastructure_encryption: bool,
    public_network_access: str,
    opts: pulumi.ResourceOptions,
    customer_managed_key: CustomerManagedKey | None = None,
) -> storage.StorageAccount:
    """A StorageV2 account that only accepts Entra-authenticated HTTPS (TLS 1.2) requests; encrypted with
    Microsoft's keys, or with `customer_managed_key` read as its user-assigned identity."""
    cmk = customer_managed_key
    return storage.StorageAccount(
        logical_name,
        resource_group_name=resource_group_name,
        location=location,
        kind=storage.Kind.STORAGE_V2,
        sku=storage.SkuArgs(name=sku),
        access_tier=storage.AccessTier.HOT,
        allow_shared_key_access=False,  # no account keys, no SAS signed with them
        allow_blob_public_access=False,
        allow_cross_tenant_replication=False,
        allowed_copy_scope=storage.AllowedCopyScope.AAD,
        default_to_o_auth_authentication=True,
        enable_https_traffic_only=True,
        minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
        is_local_user_enabled=False,
        is_sftp_enabled=False,
        # "Disabled" with private networking: only the VNet's private endpoints reach the account.
        public_network_access=public_network_access,
        identity=(
            storage.IdentityArgs(
                type=storage.IdentityType.USER_ASSIGNED, user_assigned_identities=[cmk.identity_id]
            )
            if cmk
            else None
        ),
        # Microsoft-managed keys (or yours, infra/encryption.py), and with `infrastructure_encryption` a
        # second AES-256 layer at the infrastructure level: Azure accepts it only when the account is created.
        encryption=storage.EncryptionArgs(
            key_source=storage.KeySource.MICROSOFT_KEYVAULT if cmk else storage.KeySource.MICROSOFT_STORAGE,
            key_vault_properties=(
                storage.KeyVaultPropertiesArgs(
                    key_vault_uri=cmk.key_vault_uri, key_name=cmk.key_name, key_version=cmk.key_version
                )
                if cmk
                else None
            ),
            encryption_identity=(
                storage.EncryptionIdentityArgs(encryption_user_assigned_identity=cmk.identity_id)
                if cmk
                else None
            ),
            require_infrastructure_encryption=infrastructure_encryption,
            services=storage.EncryptionServicesArgs(
                blob=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
                table=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
                queue=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
            ),
        ),
        opts=opts,
    )


class PayloadStorage(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        sku: str,
        account_logical_name: str,
        infrastructure_encryption: bool,
        public_network_access: str,
        blob_delete_retention_days: int,
        container_delete_retention_days: int,
        topology: Topology,
        immutable_containers: Mapping[str, int] | None = None,
        customer_managed_key: CustomerManagedKey | None = None,
        account_opts: pulumi.ResourceOptions | None = None,
        data_opts: pulumi.ResourceOptions | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:storage:PayloadStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Containers and tables hold the data (tables have no soft delete): `data_opts` protects them
        # (outside dev) and retains them on delete, so a topology rename never deletes one.
        data = child.merge(data_opts)
        self.account = secure_storage_account(
            account_logical_name,
            resource_group_name=resource_group_name,
            location=location,
            sku=sku,
            infrastructure_encryption=infrastructure_encryption,
            public_network_access=public_network_access,
            opts=child.merge(account_opts),
            customer_managed_key=customer_managed_key,
        )
        account_name = self.account.name
        self.blob_service = storage.BlobServiceProperties(
            f"{name}-blob-service",
            resource_group_name=resource_group_name,
            account_name=account_name,
            blob_services_name="default",
            is_versioning_enabled=True,
            delete_retention_policy=storage.DeleteRetentionPolicyArgs(
                enabled=True, days=blob_delete_retention_days
            ),
            container_delete_retention_policy=storage.DeleteRetentionPolicyArgs(
                enabled=True, days=container_delete_retention_days
            ),
            opts=child,
        )
        locked = dict(immutable_containers or {})
        purposes = container_purposes(topology)
        self.containers = {
            container: storage.BlobContainer(
                f"{name}-container-{container}",
                resource_group_name=resource_group_name,
                account_name=account_name,
                container_name=container,
                public_access=storage.PublicAccess.NONE,
                # Which purposes' payloads the container holds: what the policy pack reads to find the
                # evidence container of a production stack.
                metadata={PURPOSES_METADATA: " ".join(purposes[container])}
                if container in purposes
                else None,
                # Version-level immutability can only be switched on when the container is created.
                immutable_storage_with_versioning=(
                    storage.ImmutableStorageWithVersioningArgs(enabled=True) if container in locked else None
                ),
                opts=data.merge(pulumi.ResourceOptions(depends_on=[self.blob_service])),
            )
            for container in topology.containers
        }
        self.immutability_policies = {
            # The container's default time-based policy, applied to every new blob version (WORM).
            container: storage.BlobContainerImmutabilityPolicy(
                f"{name}-worm-{container}",
                resource_group_name=resource_group_name,
                account_name=account_name,
                container_name=self.containers[container].name,
                immutability_policy_name="default",
                immutability_period_since_creation_in_days=days,
                allow_protected_append_writes_all=False,
                opts=child,
            )
            for container, days in locked.items()
        }
        self.tables = {
            table: storage.Table(
                f"{name}-table-{table}",
                resource_group_name=resource_group_name,
                account_name=account_name,
                table_name=table,
                opts=data,
            )
            for table in topology.tables.all()
        }
        self.lifecycle = storage.ManagementPolicy(
            f"{name}-lifecycle",
            resource_group_name=resource_group_name,
            account_name=account_name,
            management_policy_name="default",
            policy=storage.ManagementPolicySchemaArgs(
                rules=lifecycle_rules(topology.lifecycle, topology.bindings.payload_containers(), locked)
            ),
            opts=child.merge(pulumi.ResourceOptions(depends_on=[self.blob_service])),
        )
        self.blob_endpoint = self.account.primary_endpoints.apply(lambda endpoints: endpoints.blob)
        self.table_endpoint = self.account.primary_endpoints.apply(lambda endpoints: endpoints.table)
        self.register_outputs(
            {
                "accountName": self.account.name,
                "blobEndpoint": self.blob_endpoint,
                "tableEndpoint": self.table_endpoint,
                "containers": list(self.containers),
                "tables": list(self.tables),
            }
        )


def container_purposes(topology: Topology) -> dict[str, list[str]]:
    """container -> the purposes of the purpose table whose payloads it holds."""
    holding: dict[str, list[str]] = {}
    for purpose in sorted(DEFAULT_PURPOSES):
        holding.setdefault(topology.bindings.container_for(purpose), []).append(purpose)
    return holding


def lifecycle_rules(
    lifecycle: LifecycleSpec, containers: Sequence[str], locked: Mapping[str, int] | None = None
) -> list[storage.ManagementPolicyRuleArgs]:
    """The backstop: orphaned provisional objects, aged payloads, and old versions, in every payload
    container. An orphan in a locked (WORM) container cannot go before its lock ends, so its rule waits
    that long (the reconciler waits likewise)."""
    locked = locked or {}
    prefix = [f"{container}/" for container in containers]
    free = [f"{container}/" for container in containers if container not in locked]

    def rule(
        name: str, filters: storage.ManagementPolicyFilterArgs, actions: storage.ManagementPolicyActionArgs
    ) -> storage.ManagementPolicyRuleArgs:
        return storage.ManagementPolicyRuleArgs(
            name=name,
            type=storage.RuleType.LIFECYCLE,
            enabled=True,
            definition=storage.ManagementPolicyDefinitionArgs(filters=filters, actions=actions),
        )

    def after(days: int) -> storage.DateAfterModificationArgs:
        return storage.DateAfterModificationArgs(days_after_modification_greater_than=days)

    def orphans(name: str, prefixes: list[str], days: int) -> storage.ManagementPolicyRuleArgs:
        # A provisional object whose publish never completed (docs/architecture.md §4, outbox-style
        # intake); the reconciliation timer removes it first, this catches what it missed.
        return rule(
            name,
            storage.ManagementPolicyFilterArgs(
                blob_types=["blockBlob"],
                prefix_match=prefixes,
                blob_index_match=[
                    storage.TagFilterArgs(
                        name=lifecycle.provisional_tag_name, op="==", value=lifecycle.provisional_tag_value
                    )
                ],
            ),
            storage.ManagementPolicyActionArgs(
                base_blob=storage.ManagementPolicyBaseBlobArgs(delete=after(days))
            ),
        )

    orphan_rules = (
        [orphans("deleteProvisionalOrphans", free, lifecycle.provisional_grace_days)] if free else []
    )
    orphan_rules += [
        orphans(
            f"deleteLockedOrphans{index}",
            [f"{container}/"],
            max(lifecycle.provisional_grace_days, days),
        )
        for index, (container, days) in enumerate(sorted(locked.items()))
    ]
    return [
        *orphan_rules,
        # Direct uploads (claimcheck.uploads): a staging blob whose commit never came; the reconciliation
        # timer removes it once its grant has expired plus the orphan grace, this catches what it missed.
        # Staging lives in the shared payload container (the first).
        rule(
            "deleteUncommittedUploads",
            storage.ManagementPolicyFilterArgs(
                blob_types=["blockBlob"], prefix_match=[f"{containers[0]}/{STAGING_PREFIX}"]
            ),
            storage.ManagementPolicyActionArgs(
                base_blob=storage.ManagementPolicyBaseBlobArgs(delete=after(lifecycle.provisional_grace_days))
            ),
        ),
        rule(
            "tierAndExpirePayloads",
            storage.ManagementPolicyFilterArgs(blob_types=["blockBlob"], prefix_match=prefix),
            storage.ManagementPolicyActionArgs(
                base_blob=storage.ManagementPolicyBaseBlobArgs(
                    tier_to_cool=after(lifecycle.cool_after_days),
                    tier_to_cold=after(lifecycle.cold_after_days),
                    delete=after(lifecycle.delete_after_days),
                )
            ),
        ),
        rule(
            "deleteOldVersions",
            storage.ManagementPolicyFilterArgs(blob_types=["blockBlob"], prefix_match=prefix),
            storage.ManagementPolicyActionArgs(
                version=storage.ManagementPolicyVersionArgs(
                    delete=storage.DateAfterCreationArgs(
                        days_after_creation_greater_than=lifecycle.old_versions_delete_after_days
                    )
                )
            ),
        ),
    ]
