"""Observability: Log Analytics, Application Insights (Entra-only ingestion), an action group, and
(after the watched resources exist) diagnostic settings, metric alerts and the log alerts (HTTP server
errors, orphan counts).

A Flex Consumption app emits only the Flex metrics (execution counts and units, instance count,
memory, CPU; infra/arm_rules.py lists them with their source), none of which counts failures, so the
API's server errors are alerted from Application Insights: the Functions host records each HTTP
invocation as a `requests` row with its status code.

Service Bus exposes no "oldest message age" platform metric (its metrics are counts: ActiveMessages,
DeadletteredMessages, ScheduledMessages, ServerErrors, ThrottledRequests, ...). Backlog age is
therefore alerted through a sustained ActiveMessages backlog, and the reconciliation timer reports
dead-letter age and orphan counts in its own telemetry (docs/architecture.md §4); a scheduled query rule on
that telemetry raises the orphan-count alert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import applicationinsights, monitor, operationalinsights

SERVICE_BUS_METRICS = "Microsoft.ServiceBus/namespaces"

# The reconciler's one line per run (logger `claimcheck.reconciler`, message "reconciliation
# finished", orphans_found in custom dimensions). The count is read from customDimensions (OpenCensus
# or OpenTelemetry exporters) or, failing that, from `orphans_found=N` in the message: the Functions
# host forwards a Python log record's message but not its `extra`. Lines without a count (e.g. the
# timer's own "reconciliation finished (past_due=...)" summary) drop out.
RECONCILER_SUMMARY_MESSAGE = "reconciliation finished"
ORPHAN_COUNT_PATTERN = r"orphans_found=(\d+)"
ORPHAN_COUNT_QUERY = f"""traces
| where message startswith "{RECONCILER_SUMMARY_MESSAGE}"
| extend orphans_found = toint(coalesce(tostring(customDimensions["orphans_found"]),
                                        extract(@"{ORPHAN_COUNT_PATTERN}", 1, message)))
| where isnotnull(orphans_found)
| project timestamp, orphans_found"""

# The API's answers with a 5xx status (the host's request telemetry, one row per HTTP invocation; other
# triggers' rows carry no HTTP status, so toint() drops them).
HTTP_SERVER_ERRORS_QUERY = """requests
| where toint(resultCode) >= 500
| project timestamp, name, resultCode"""
HTTP_SERVER_ERRORS_DESCRIPTION = (
    "The Function App answered HTTP 5xx in the last 15 minutes: submissions, uploads or status reads "
    "failed on the service side, so callers are retrying or giving up and documents may not have been "
    "accepted. The alert is split by function (the requests' name); their exceptions are in "
    "Application Insights."
)


def orphan_alert_description(provisional_grace_days: int) -> str:
    """What an orphan means for the people paged (docs/architecture.md §4: alerts say the consequence)."""
    return (
        "Reconciliation found orphaned payloads in the last hour: a producer stored a document but "
        "its message was never published, so no worker received it and the work item will not be "
        "processed unless the producer resubmits. The provisional object is removed after the "
        "reconciliation grace period (the lifecycle rule deletes any left after "
        f"{provisional_grace_days} day(s)). The reconciler's ALERT lines in traces name the work "
        "items."
    )


class Monitoring(pulumi.ComponentResource):
    """Workspace, Application Insights and the action group that alerts notify."""

    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        location: str,
        retention_days: int,
        alert_emails: Sequence[str],
        private_ingestion: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:observability:Monitoring", name, None, opts)
        # With private networking, telemetry is accepted only through the Azure Monitor Private Link Scope
        # (infra/components/network.py link_monitoring); queries stay public for the portal.
        ingestion = "Disabled" if private_ingestion else "Enabled"
        child = pulumi.ResourceOptions(parent=self)
        self.workspace = operationalinsights.Workspace(
            f"{name}-logs",
            resource_group_name=resource_group_name,
            location=location,
            sku=operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
            retention_in_days=retention_days,
            public_network_access_for_ingestion=ingestion,
            public_network_access_for_query="Enabled",
            opts=child,
        )
        self.app_insights = applicationinsights.Component(
            f"{name}-appi",
            resource_group_name=resource_group_name,
            location=location,
            kind="web",
            application_type="web",
            ingestion_mode="LogAnalytics",
            workspace_resource_id=self.workspace.id,
            disable_local_auth=True,  # ingestion only with an Entra token (Monitoring Metrics Publisher)
            retention_in_days=retention_days,
            public_network_access_for_ingestion=ingestion,
            public_network_access_for_query="Enabled",
            opts=child,
        )
        # Preview API version, why: infra/api_versions.py.
        self.action_group = monitor.ActionGroup(
            f"{name}-alerts",
            resource_group_name=resource_group_name,
            location="global",
            group_short_name="claimcheck",
            enabled=True,
            email_receivers=[
                monitor.MicrosoftCommonEmailReceiverArgs(
                    name=f"email-{index}", email_address=email, use_common_alert_schema=True
                )
                for index, email in enumerate(alert_emails)
            ],
            opts=child,
        )
        self.register_outputs(
            {
                "workspaceId": self.workspace.id,
                "appInsightsId": self.app_insights.id,
                "actionGroupId": self.action_group.id,
            }
        )


@dataclass(frozen=True)
class MetricAlertSpec:
    key: str
    description: str
    metric: str
    aggregation: str
    threshold: float
    severity: int
    per_entity: bool = False


def service_bus_alerts(backlog_threshold: int) -> list[MetricAlertSpec]:
    return [
        MetricAlertSpec(
            "dead-letters",
            "Messages are in a dead-letter queue: a document or result failed "
            "permanently and waits for investigation and replay.",
            "DeadletteredMessages",
            "Maximum",
            0,
            1,
            per_entity=True,
        ),
        MetricAlertSpec(
            "backlog",
            f"More than {backlog_threshold} active messages for 15 minutes: "
            "consumers are not keeping up, so messages are ageing.",
            "ActiveMessages",
            "Minimum",
            backlog_threshold,
            2,
            per_entity=True,
        ),
        MetricAlertSpec(
            "server-errors",
            "Service Bus returned server errors: sends or receives failed on the service side.",
            "ServerErrors",
            "Total",
            0,
            2,
        ),
    ]


class Alerts(pulumi.ComponentResource):
    """Diagnostic settings to the workspace, and metric alerts to the action group."""

    def __init__(
        self,
        name: str,
        *,
        resource_group_name: pulumi.Input[str],
        monitoring: Monitoring,
        namespace_id: pulumi.Input[str],
        payload_account_id: pulumi.Input[str],
        function_app_id: pulumi.Input[str],
        backlog_threshold: int,
        location: str,
        provisional_grace_days: int,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("claimcheck:observability:Alerts", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        workspace_id = monitoring.workspace.id
        targets: dict[str, pulumi.Input[str]] = {
            "servicebus": namespace_id,
            "payload-blobs": pulumi.Output.concat(payload_account_id, "/blobServices/default"),
            "function-app": function_app_id,
        }
        for key, resource_uri in targets.items():
            # Preview API version, why: infra/api_versions.py.
            monitor.DiagnosticSetting(
                f"{name}-diag-{key}",
                name="to-log-analytics",
                resource_uri=resource_uri,
                workspace_id=workspace_id,
                logs=[monitor.DiagnosticsLogSettingsArgs(category_group="allLogs", enabled=True)],
                metrics=[monitor.DiagnosticsMetricSettingsArgs(category="AllMetrics", enabled=True)],
                opts=child,
            )
        for spec in service_bus_alerts(backlog_threshold):
            self._alert(
                name,
                spec,
                SERVICE_BUS_METRICS,
                namespace_id,
                resource_group_name,
                monitoring.action_group.id,
                child,
            )
        _log_alert(
            f"{name}-http-server-errors",
            display_name="claimcheck: API server errors",
            description=HTTP_SERVER_ERRORS_DESCRIPTION,
            schedule=("PT5M", "PT15M"),
            query=HTTP_SERVER_ERRORS_QUERY,
            aggregation=monitor.TimeAggregation.COUNT,
            split_by="name",
            resource_group_name=resource_group_name,
            location=location,
            monitoring=monitoring,
            opts=child,
        )
        self.orphan_alert = _log_alert(
            f"{name}-orphans",
            display_name="claimcheck: orphaned payloads",
            description=orphan_alert_description(provisional_grace_days),
            schedule=("PT15M", "PT1H"),
            query=ORPHAN_COUNT_QUERY,
            aggregation=monitor.TimeAggregation.MAXIMUM,
            measure_column="orphans_found",
            resource_group_name=resource_group_name,
            location=location,
            monitoring=monitoring,
            opts=child,
        )
        self.register_outputs({})

    def _alert(
        self,
        name: str,
        spec: MetricAlertSpec,
        metric_namespace: str,
        scope: pulumi.Input[str],
        resource_group_name: pulumi.Input[str],
        action_group_id: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> None:
        # Splitting by EntityName gives one alert per queue/subscription, naming the entity.
        dimensions = (
            [monitor.MetricDimensionArgs(name="EntityName", operator="Include", values=["*"])]
            if spec.per_entity
            else None
        )
        monitor.MetricAlert(
            f"{name}-{spec.key}",
            resource_group_name=resource_group_name,
            location="global",
            description=spec.description,
            severity=spec.severity,
            enabled=True,
            auto_mitigate=True,
            scopes=[scope],
            evaluation_frequency="PT5M",
            window_size="PT15M",
            criteria=monitor.MetricAlertSingleResourceMultipleMetricCriteriaArgs(
                odata_type="Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria",
                all_of=[
                    monitor.MetricCriteriaArgs(
                        criterion_type="StaticThresholdCriterion",
                        name=spec.key,
                        metric_name=spec.metric,
                        metric_namespace=metric_namespace,
                        operator="GreaterThan",
                        threshold=spec.threshold,
                        time_aggregation=spec.aggregation,
                        dimensions=dimensions,
                    )
                ],
            ),
            actions=[monitor.MetricAlertActionArgs(action_group_id=action_group_id)],
            opts=child,
        )


def _log_alert(
    resource_name: str,
    *,
    display_name: str,
    description: str,
    schedule: tuple[str, str],
    query: str,
    aggregation: monitor.TimeAggregation,
    resource_group_name: pulumi.Input[str],
    location: str,
    monitoring: Monitoring,
    opts: pulumi.ResourceOptions,
    measure_column: str | None = None,
    split_by: str | None = None,
) -> monitor.ScheduledQueryRule:
    """A log alert on Application Insights: fires when `query`'s rows, aggregated (over
    `measure_column`, or counted), exceed 0 in one evaluation; `schedule` is (frequency, window)."""
    frequency, window = schedule
    # Preview API version, why: infra/api_versions.py.
    return monitor.ScheduledQueryRule(
        resource_name,
        resource_group_name=resource_group_name,
        location=location,
        kind=monitor.Kind.LOG_ALERT,
        display_name=display_name,
        description=description,
        severity=2,
        enabled=True,
        auto_mitigate=True,
        scopes=[monitoring.app_insights.id],
        evaluation_frequency=frequency,
        window_size=window,
        criteria=monitor.ScheduledQueryRuleCriteriaArgs(
            all_of=[
                monitor.ConditionArgs(
                    query=query,
                    time_aggregation=aggregation,
                    metric_measure_column=measure_column,
                    # One alert per value of this column (e.g. per function), naming it.
                    dimensions=[monitor.DimensionArgs(name=split_by, operator="Include", values=["*"])]
                    if split_by
                    else None,
                    # Not monitor.ConditionOperator: in azure-native 3.x that enum is another API's ("gt").
                    operator="GreaterThan",
                    threshold=0,
                    failing_periods=monitor.ConditionFailingPeriodsArgs(
                        number_of_evaluation_periods=1, min_failing_periods_to_alert=1
                    ),
                )
            ]
        ),
        actions=monitor.ActionsArgs(action_groups=[monitoring.action_group.id]),
        opts=opts,
    )
