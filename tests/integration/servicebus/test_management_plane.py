"""The management plane with the real, unmodified ServiceBusAdministrationClient over HTTPS (trusting
the emulator's generated certificate): entities, rules, counts; and plain HTTP, still served."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)
from servicebus_emulator import RunningEmulator
from servicebus_emulator.admin_client import administration_client

from tests.integration.servicebus.support import LOCK_SECONDS, stock_admin_client

QUEUES = ["work", "sessions", "dedup", "expiring", "expiring-drop", "inbox", "fragile"]


@pytest.fixture
def admin(emulator: RunningEmulator) -> ServiceBusAdministrationClient:
    return stock_admin_client(emulator)


def test_entities_and_their_settings_come_from_config(admin: ServiceBusAdministrationClient) -> None:
    """list_* and get_* describe the Config.json entities with their settings, case-insensitively."""
    with admin:
        assert [queue.name for queue in admin.list_queues()] == QUEUES
        assert [queue.name for queue in admin.list_queues(max_page_size=3)] == QUEUES  # paged
        work = admin.get_queue("WORK")  # names are case-insensitive
        assert work.lock_duration == timedelta(seconds=LOCK_SECONDS)
        assert work.max_delivery_count == 3
        assert admin.get_queue("sessions").requires_session is True
        dedup = admin.get_queue("dedup")
        assert dedup.requires_duplicate_detection is True
        assert dedup.duplicate_detection_history_time_window == timedelta(seconds=20)
        assert admin.get_queue("inbox").forward_to == "work"
        assert admin.get_queue("fragile").forward_dead_lettered_messages_to == "work"
        assert [topic.name for topic in admin.list_topics()] == ["results"]
        assert admin.get_topic("results").requires_duplicate_detection is True
        subscriptions = [sub.name for sub in admin.list_subscriptions("results")]
        assert subscriptions == ["audit", "per-item", "notifications", "contracts", "review"]
        assert admin.get_subscription("results", "per-item").requires_session is True


def test_rules_are_described_with_their_filters_and_actions(admin: ServiceBusAdministrationClient) -> None:
    """$Default is a TrueFilter; SQL filters/actions and correlation properties keep their values."""
    with admin:
        (default,) = admin.list_rules("results", "audit")
        assert default.name == "$Default"
        assert isinstance(default.filter, TrueRuleFilter)
        (high,) = admin.list_rules("results", "notifications")
        assert isinstance(high.filter, SqlRuleFilter)
        assert high.filter.sql_expression == "priority = 'high'"
        assert isinstance(high.action, SqlRuleAction)
        assert high.action.sql_expression == "SET sys.Label = 'urgent'"
        contracts = admin.get_rule("results", "contracts", "contracts")
        assert isinstance(contracts.filter, CorrelationRuleFilter)
        assert contracts.filter.properties == {"document_type": "contract"}
        assert contracts.action is None


def test_runtime_properties_count_messages(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """Active, dead-lettered and scheduled counts of queues, topics and subscriptions, as sent."""
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c")])
        sender.schedule_messages(ServiceBusMessage("later"), datetime.now(UTC) + timedelta(hours=1))
    with client.get_queue_receiver("work", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="bad")
    with client.get_topic_sender("results") as sender:
        sender.send_messages(ServiceBusMessage("x", application_properties={"priority": "high"}))
        sender.schedule_messages(ServiceBusMessage("later"), datetime.now(UTC) + timedelta(hours=1))
    with admin:
        work = admin.get_queue_runtime_properties("work")
        assert (work.active_message_count, work.dead_letter_message_count) == (2, 1)
        assert work.scheduled_message_count == 1
        assert work.total_message_count == 4
        listed = {queue.name: queue.active_message_count for queue in admin.list_queues_runtime_properties()}
        assert listed["work"] == 2
        assert listed["dedup"] == 0
        assert admin.get_topic_runtime_properties("results").scheduled_message_count == 1
        assert admin.get_topic_runtime_properties("results").subscription_count == 5
        counts = {
            sub.name: sub.active_message_count
            for sub in admin.list_subscriptions_runtime_properties("results")
        }
        assert counts == {"audit": 1, "per-item": 0, "notifications": 1, "contracts": 0, "review": 0}
        # per-item requires sessions: the copy without a session id was dead-lettered, as on Azure
        assert admin.get_subscription_runtime_properties("results", "per-item").dead_letter_message_count == 1


def test_unknown_entities_and_bad_keys_are_refused(emulator: RunningEmulator) -> None:
    """404 for an entity that does not exist, 401 for a wrong key, 405 for a method not served."""
    with stock_admin_client(emulator) as admin:
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue("missing")
        with pytest.raises(ResourceNotFoundError):
            admin.get_subscription("results", "missing")
        with pytest.raises(ResourceNotFoundError):
            admin.get_rule("results", "audit", "missing")
    wrong = emulator.management_connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    with (
        ServiceBusAdministrationClient.from_connection_string(
            wrong, connection_verify=str(emulator.certificate_path), retry_total=0
        ) as admin,
        pytest.raises(ClientAuthenticationError),
    ):
        admin.get_queue("work")


def test_the_management_port_is_tls_with_a_certificate_clients_must_trust(emulator: RunningEmulator) -> None:
    """Without trusting the emulator's certificate the stock client's handshake fails, as against any
    unknown issuer (the port really is TLS, not plain HTTP the client tolerates); trusting it through
    REQUESTS_CA_BUNDLE instead of connection_verify works too."""
    plain = emulator.management_connection_string
    with (
        ServiceBusAdministrationClient.from_connection_string(plain, retry_total=0) as admin,
        pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        admin.get_queue("work")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REQUESTS_CA_BUNDLE", str(emulator.certificate_path))
        with ServiceBusAdministrationClient.from_connection_string(plain, retry_total=0) as admin:
            assert admin.get_queue("work").name == "work"


def test_plain_http_is_still_served_on_the_same_port(emulator: RunningEmulator) -> None:
    """A client that speaks plain HTTP to the management port (the project's own transport) is answered
    too: the port tells TLS from HTTP by the connection's first byte."""
    with administration_client(emulator.management_connection_string, retry_total=0) as admin:
        assert admin.get_queue("work").max_delivery_count == 3


def test_namespace_properties(admin: ServiceBusAdministrationClient) -> None:
    """get_namespace_properties (`$namespaceinfo`, a common health check): Config.json's namespace."""
    with admin:
        properties = admin.get_namespace_properties()
    assert (properties.name, properties.messaging_sku, properties.namespace_type) == (
        "sbemulatorns",
        "Standard",
        "Messaging",
    )
