"""Service Bus: a namespace without SAS (Entra only), and the queues, topics, subscriptions and rules
of the topology spec."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_azure_native import servicebus

from infra.app_settings import service_bus_fqdn
from infra.encryption import CustomerManagedKey
from infra.topology import RuleSpec, SubscriptionSpec, TopicSpec, Topology

# Every subscription declares its `$Default` rule (servicebus.DefaultRule), always under the same
# logical name: with explicit rules it matches nothing (FALSE_FILTER), without them it matches
# everything (TRUE_FILTER). Adding or removing a subscription's rules is then an update of `$Default`,
# never a create or a delete: deleting the DefaultRule resource deletes `$Default` itself, and a
# subscription without rules silently receives nothing. retain_on_delete keeps `$Default` in Azure
# even when the resource leaves the program (the subscription's own deletion removes it with it).
FALSE_FILTER = "1=0"
TRUE_FILTER = "1=1"


class Messaging(pulumi.ComponentResource):
    """The namespace and every entity of the topology."""

    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        sku: str,
        capacity: int,
        public_network_access: str,
        topology: Topology,
        zone_redundant: bool = False,
        customer_managed_key: CustomerManagedKey | None = None,
        namespace_opts: pulumi.ResourceOptions | None = None,
        entity_opts: pulumi.ResourceOptions | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:messaging:Messaging", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Queues, topics and subscriptions hold messages: `entity_opts` protects them (outside dev) and
        # retains them on delete, so a topology rename never deletes one with messages in flight.
        entities = child.merge(entity_opts)
        self._resource_group_name = resource_group_name
        self.namespace = servicebus.Namespace(
            f"{name}-ns",
            resource_group_name=resource_group_name,
            location=location,
            sku=servicebus.SBSkuArgs(
                name=servicebus.SkuName(sku),
                tier=servicebus.SkuTier(sku),
                capacity=capacity if sku == "Premium" else None,
            ),
            disable_local_auth=True,  # no SAS keys: every client authenticates with Entra ID
            minimum_tls_version="1.2",
            public_network_access=public_network_access,
            # Premium only; replicas across availability zones, chosen when the namespace is created.
            zone_redundant=True if zone_redundant else None,
            # Your key (Premium only; a Standard namespace keeps Microsoft's), read as the named identity.
            **_encryption(customer_managed_key if sku == "Premium" else None),
            opts=child.merge(namespace_opts),
        )
        self.queues = {
            queue.name: servicebus.Queue(
                f"{name}-queue-{queue.name}",
                resource_group_name=resource_group_name,
                namespace_name=self.namespace.name,
                queue_name=queue.name,
                requires_session=queue.requires_session,
                max_delivery_count=queue.max_delivery_count,
                lock_duration=queue.lock_duration,
                default_message_time_to_live=queue.default_message_time_to_live,
                dead_lettering_on_message_expiration=queue.dead_lettering_on_message_expiration,
                requires_duplicate_detection=queue.requires_duplicate_detection,
                duplicate_detection_history_time_window=(
                    queue.duplicate_detection_history_time_window
                    if queue.requires_duplicate_detection
                    else None
                ),
                opts=entities,
            )
            for queue in topology.queues
        }
        self.topics: dict[str, servicebus.Topic] = {}
        self.subscriptions: dict[str, servicebus.Subscription] = {}
        for topic in topology.topics:
            self._topic(name, topic, child, entities)
        self.namespace_fqdn = self.namespace.service_bus_endpoint.apply(service_bus_fqdn)
        self.register_outputs(
            {
                "namespaceName": self.namespace.name,
                "namespaceFqdn": self.namespace_fqdn,
                "queues": list(self.queues),
                "topics": list(self.topics),
            }
        )

    def _topic(
        self, name: str, topic: TopicSpec, child: pulumi.ResourceOptions, entities: pulumi.ResourceOptions
    ) -> None:
        resource = servicebus.Topic(
            f"{name}-topic-{topic.name}",
            resource_group_name=self._resource_group_name,
            namespace_name=self.namespace.name,
            topic_name=topic.name,
            default_message_time_to_live=topic.default_message_time_to_live,
            requires_duplicate_detection=topic.requires_duplicate_detection,
            duplicate_detection_history_time_window=(
                topic.duplicate_detection_history_time_window if topic.requires_duplicate_detection else None
            ),
            opts=entities,
        )
        self.topics[topic.name] = resource
        for subscription in topic.subscriptions:
            self._subscription(name, topic.name, resource, subscription, child, entities)

    def _subscription(
        self,
        name: str,
        topic_name: str,
        topic: servicebus.Topic,
        spec: SubscriptionSpec,
        child: pulumi.ResourceOptions,
        entities: pulumi.ResourceOptions,
    ) -> None:
        logical = f"{name}-sub-{topic_name}-{spec.name}"
        subscription = servicebus.Subscription(
            logical,
            resource_group_name=self._resource_group_name,
            namespace_name=self.namespace.name,
            topic_name=topic.name,
            subscription_name=spec.name,
            requires_session=spec.requires_session,
            max_delivery_count=spec.max_delivery_count,
            lock_duration=spec.lock_duration,
            default_message_time_to_live=spec.default_message_time_to_live,
            dead_lettering_on_message_expiration=spec.dead_lettering_on_message_expiration,
            dead_lettering_on_filter_evaluation_exceptions=spec.dead_lettering_on_filter_evaluation_exceptions,
            opts=entities,
        )
        self.subscriptions[f"{topic_name}/{spec.name}"] = subscription
        servicebus.DefaultRule(
            f"{logical}-default",
            resource_group_name=self._resource_group_name,
            namespace_name=self.namespace.name,
            topic_name=topic.name,
            subscription_name=subscription.name,
            filter_type=servicebus.FilterType.SQL_FILTER,
            sql_filter=servicebus.SqlFilterArgs(sql_expression=FALSE_FILTER if spec.rules else TRUE_FILTER),
            opts=child.merge(pulumi.ResourceOptions(retain_on_delete=True)),
        )
        for rule in spec.rules:
            correlation = _correlation_args(rule)
            servicebus.Rule(
                f"{logical}-rule-{rule.name}",
                resource_group_name=self._resource_group_name,
                namespace_name=self.namespace.name,
                topic_name=topic.name,
                subscription_name=subscription.name,
                rule_name=rule.name,
                filter_type=(
                    servicebus.FilterType.SQL_FILTER
                    if correlation is None
                    else servicebus.FilterType.CORRELATION_FILTER
                ),
                sql_filter=(
                    servicebus.SqlFilterArgs(sql_expression=rule.sql_filter) if correlation is None else None
                ),
                correlation_filter=correlation,
                action=servicebus.ActionArgs(sql_expression=rule.action) if rule.action is not None else None,
                opts=child,
            )


def _correlation_args(rule: RuleSpec) -> servicebus.CorrelationFilterArgs | None:
    correlation = rule.correlation_filter
    if correlation is None:
        return None
    return servicebus.CorrelationFilterArgs(
        correlation_id=correlation.correlation_id,
        message_id=correlation.message_id,
        to=correlation.to,
        reply_to=correlation.reply_to,
        label=correlation.label,
        session_id=correlation.session_id,
        reply_to_session_id=correlation.reply_to_session_id,
        content_type=correlation.content_type,
        # The ARM API takes application property values as strings.
        properties={key: _property_text(value) for key, value in correlation.properties.items()} or None,
    )


def _property_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _encryption(key: CustomerManagedKey | None) -> dict[str, Any]:
    """The namespace's identity and encryption arguments for a customer-managed key, none without."""
    if key is None:
        return {}
    return {
        "identity": servicebus.IdentityArgs(
            type=servicebus.ManagedServiceIdentityType.USER_ASSIGNED,
            user_assigned_identities=[key.identity_id],
        ),
        "encryption": servicebus.EncryptionArgs(
            key_source=servicebus.KeySource.MICROSOFT_KEY_VAULT,
            key_vault_properties=[
                servicebus.KeyVaultPropertiesArgs(
                    key_vault_uri=key.key_vault_uri,
                    key_name=key.key_name,
                    key_version=key.key_version,
                    identity=servicebus.UserAssignedIdentityPropertiesArgs(
                        user_assigned_identity=key.identity_id
                    ),
                )
            ],
        ),
    }
