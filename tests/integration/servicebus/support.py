"""Shared test material: the namespace most emulator tests use (short locks and TTLs)."""

from __future__ import annotations

from typing import Any

from azure.servicebus.management import ServiceBusAdministrationClient
from servicebus_emulator import RunningEmulator

LOCK_SECONDS = 2


def stock_admin_client(emulator: RunningEmulator, **options: Any) -> ServiceBusAdministrationClient:
    """The SDK's own administration client over HTTPS, trusting the emulator's generated certificate
    (no custom transport); no retries, so a refusal shows at once."""
    options.setdefault("retry_total", 0)
    return ServiceBusAdministrationClient.from_connection_string(
        emulator.management_connection_string, connection_verify=str(emulator.certificate_path), **options
    )


def _queue(name: str, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": properties}


def emulator_config() -> dict[str, Any]:
    """The namespace most tests use: every feature on a small, fast entity."""
    lock = f"PT{LOCK_SECONDS}S"
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        _queue("work", LockDuration=lock, MaxDeliveryCount=3),
                        _queue("sessions", RequiresSession=True, LockDuration=lock, MaxDeliveryCount=5),
                        _queue(
                            "dedup",
                            RequiresDuplicateDetection=True,
                            DuplicateDetectionHistoryTimeWindow="PT20S",
                        ),
                        _queue(
                            "expiring", DefaultMessageTimeToLive="PT1S", DeadLetteringOnMessageExpiration=True
                        ),
                        _queue("expiring-drop", DefaultMessageTimeToLive="PT1S"),
                        _queue("inbox", ForwardTo="work"),
                        _queue(
                            "fragile",
                            LockDuration=lock,
                            MaxDeliveryCount=1,
                            ForwardDeadLetteredMessagesTo="work",
                        ),
                    ],
                    "Topics": [
                        {
                            "Name": "results",
                            "Properties": {
                                "RequiresDuplicateDetection": True,
                                "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            },
                            "Subscriptions": [
                                {"Name": "audit", "Properties": {"LockDuration": lock}},
                                {
                                    "Name": "per-item",
                                    "Properties": {"RequiresSession": True, "LockDuration": lock},
                                },
                                {
                                    "Name": "notifications",
                                    "Rules": [
                                        {
                                            "Name": "high-priority",
                                            "Properties": {
                                                "FilterType": "Sql",
                                                "SqlFilter": {"SqlExpression": "priority = 'high'"},
                                                "Action": {"SqlExpression": "SET sys.Label = 'urgent'"},
                                            },
                                        }
                                    ],
                                },
                                {
                                    "Name": "contracts",
                                    "Rules": [
                                        {
                                            "Name": "contracts",
                                            "Properties": {
                                                "FilterType": "Correlation",
                                                "CorrelationFilter": {
                                                    "Properties": {"document_type": "contract"}
                                                },
                                            },
                                        }
                                    ],
                                },
                                {
                                    "Name": "review",
                                    "Rules": [
                                        {
                                            "Name": "review",
                                            "Properties": {
                                                "FilterType": "Sql",
                                                "SqlFilter": {"SqlExpression": "review_required = TRUE"},
                                            },
                                        }
                                    ],
                                },
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }
