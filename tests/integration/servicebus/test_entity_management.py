"""Entity management through the stock ServiceBusAdministrationClient: create, update and delete of
queues, topics, subscriptions and rules, with Azure's refusals, served on the data plane at once and
persisted across a SIGKILL. The first four tests make the calls of Microsoft's management samples
(azure-sdk-for-python, sdk/servicebus/azure-servicebus/samples/sync_samples/mgmt_*.py) in their
order, with their arguments."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)
from servicebus_emulator import RunningEmulator, start_process

from tests.integration.servicebus.support import emulator_config, stock_admin_client


@pytest.fixture
def admin(emulator: RunningEmulator) -> ServiceBusAdministrationClient:
    return stock_admin_client(emulator)


def _unique(prefix: str) -> str:
    return prefix + str(uuid.uuid4())


def test_the_queue_samples_calls(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    """mgmt_queue.py: create, list, get and update (model, then keyword), runtime properties,
    delete; the new queue carries messages meanwhile."""
    name = _unique("sb_mgmt_queue")
    with admin:
        created = admin.create_queue(name, max_delivery_count=10, dead_lettering_on_message_expiration=True)
        assert created.max_delivery_count == 10
        assert created.lock_duration == timedelta(minutes=1)  # Azure's defaults, not the Docker emulator's
        unlimited = created.default_message_time_to_live
        assert isinstance(unlimited, timedelta)
        assert unlimited > timedelta(days=10_000)  # TimeSpan.MaxValue: no TTL
        assert name in [queue.name for queue in admin.list_queues()]
        properties = admin.get_queue(name)
        assert properties.dead_lettering_on_message_expiration is True
        properties.max_delivery_count = 5
        admin.update_queue(properties)
        assert admin.get_queue(name).max_delivery_count == 5
        admin.update_queue(admin.get_queue(name), max_delivery_count=3)
        assert admin.get_queue(name).max_delivery_count == 3
        with client.get_queue_sender(name) as sender:
            sender.send_messages(ServiceBusMessage("to a created queue"))
        assert admin.get_queue_runtime_properties(name).total_message_count == 1
        admin.delete_queue(name)
        assert name not in [queue.name for queue in admin.list_queues()]
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue(name)


def test_the_topic_samples_calls(admin: ServiceBusAdministrationClient) -> None:
    """mgmt_topic.py: create, list, get and update the TTL (model, then keyword), runtime, delete."""
    name = _unique("sb_mgmt_topic")
    with admin:
        admin.create_topic(name)
        assert name in [topic.name for topic in admin.list_topics()]
        properties = admin.get_topic(name)
        properties.default_message_time_to_live = timedelta(minutes=10)
        admin.update_topic(properties)
        admin.update_topic(admin.get_topic(name), default_message_time_to_live=timedelta(minutes=15))
        assert admin.get_topic(name).default_message_time_to_live == timedelta(minutes=15)
        assert admin.get_topic_runtime_properties(name).subscription_count == 0
        admin.delete_topic(name)
        with pytest.raises(ResourceNotFoundError):
            admin.get_topic(name)


def test_the_subscription_samples_calls(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """mgmt_subscription.py on a Config.json topic: the new subscription starts with $Default and
    receives the topic's messages; update (model, then keyword), runtime, delete."""
    name = _unique("sb_mgmt_sub")
    with admin:
        admin.create_subscription("results", name)
        assert name in [sub.name for sub in admin.list_subscriptions("results")]
        assert [rule.name for rule in admin.list_rules("results", name)] == ["$Default"]
        properties = admin.get_subscription("results", name)
        properties.max_delivery_count = 5
        admin.update_subscription("results", properties)
        admin.update_subscription("results", admin.get_subscription("results", name), max_delivery_count=3)
        assert admin.get_subscription("results", name).max_delivery_count == 3
        with client.get_topic_sender("results") as sender:
            sender.send_messages(ServiceBusMessage("fan out"))
        assert admin.get_subscription_runtime_properties("results", name).active_message_count == 1
        admin.delete_subscription("results", name)
        assert name not in [sub.name for sub in admin.list_subscriptions("results")]


def test_the_rule_samples_calls(admin: ServiceBusAdministrationClient, client: ServiceBusClient) -> None:
    """mgmt_rule.py: a rule with the default filter, one with a parametrized SQL filter, list,
    update with new parameters, delete; the parametrized rule filters the subscription's copies."""
    rule, sql_rule = _unique("sb_mgmt_rule"), _unique("sb_sql_rule")
    with admin:
        admin.create_subscription("results", "rules")
        admin.delete_rule("results", "rules", "$Default")
        admin.create_rule("results", "rules", rule)
        parametrized = SqlRuleFilter(
            "property1 = @param1 AND property2 = @param2", parameters={"@param1": "value", "@param2": 1}
        )
        admin.create_rule("results", "rules", sql_rule, filter=parametrized)
        assert [found.name for found in admin.list_rules("results", "rules")] == [rule, sql_rule]
        properties = admin.get_rule("results", "rules", rule)
        properties.filter = SqlRuleFilter(
            "property1 = @param1 AND property2 = @param2", parameters={"@param1": "value2", "@param2": 2}
        )
        admin.update_rule("results", "rules", properties)
        updated = admin.get_rule("results", "rules", rule).filter
        assert isinstance(updated, SqlRuleFilter)
        assert updated.parameters == {"@param1": "value2", "@param2": 2}
        admin.update_rule("results", "rules", admin.get_rule("results", "rules", rule), filter=updated)
        with client.get_topic_sender("results") as sender:
            for value, number in (("value2", 2), ("value", 1), ("other", 9)):
                sender.send_messages(
                    ServiceBusMessage(value, application_properties={"property1": value, "property2": number})
                )
        with client.get_subscription_receiver("results", "rules", max_wait_time=5) as receiver:
            received = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert sorted(str(message) for message in received) == ["value", "value2"]
        admin.delete_rule("results", "rules", rule)
        admin.delete_rule("results", "rules", sql_rule)
        assert list(admin.list_rules("results", "rules")) == []


def test_a_correlation_rule_with_an_action(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    with admin:
        admin.create_subscription("results", "contracts-2", lock_duration=timedelta(seconds=30))
        admin.create_rule(
            "results",
            "contracts-2",
            "tagged",
            filter=CorrelationRuleFilter(properties={"document_type": "contract"}),
            action=SqlRuleAction("SET sys.Label = 'contract'"),
        )
        admin.delete_rule("results", "contracts-2", "$Default")
        read = admin.get_rule("results", "contracts-2", "tagged")
        assert isinstance(read.filter, CorrelationRuleFilter)
        assert read.filter.properties == {"document_type": "contract"}
    with client.get_topic_sender("results") as sender:
        sender.send_messages(ServiceBusMessage("c", application_properties={"document_type": "contract"}))
        sender.send_messages(ServiceBusMessage("i", application_properties={"document_type": "invoice"}))
    with client.get_subscription_receiver("results", "contracts-2", max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=10, max_wait_time=5)
        assert (str(message), message.subject) == ("c", "contract")


def _refused(call: Any, status: int, reason: str) -> None:
    with pytest.raises(HttpResponseError) as raised:
        call()
    assert raised.value.status_code == status
    assert reason in str(raised.value)


def test_azure_refusals(admin: ServiceBusAdministrationClient) -> None:
    """409 for a name taken (queues and topics share names), 404 for updating or deleting what does
    not exist, 400 naming the property for what Azure refuses or the emulator does not implement."""
    with admin:
        with pytest.raises(ResourceExistsError):
            admin.create_queue("work")
        with pytest.raises(ResourceExistsError):
            admin.create_queue("RESULTS")  # a topic's name, case-insensitively
        with pytest.raises(ResourceExistsError):
            admin.create_subscription("results", "audit")
        with pytest.raises(ResourceNotFoundError):
            admin.delete_queue("missing")
        with pytest.raises(ResourceNotFoundError):
            admin.create_subscription("missing", "sub")
        with pytest.raises(ResourceNotFoundError):
            admin.delete_rule("results", "audit", "missing")
        missing = admin.get_queue("work")
        missing.name = "not-there"
        with pytest.raises(ResourceNotFoundError):
            admin.update_queue(missing)
        _refused(lambda: admin.create_queue("short", lock_duration=timedelta(seconds=4)), 400, "LockDuration")
        _refused(lambda: admin.create_queue("long", lock_duration=timedelta(minutes=6)), 400, "LockDuration")
        _refused(lambda: admin.create_queue("bad", max_delivery_count=0), 400, "MaxDeliveryCount")
        _refused(
            lambda: admin.create_queue("dup", duplicate_detection_history_time_window=timedelta(seconds=10)),
            400,
            "DuplicateDetectionHistoryTimeWindow",
        )
        _refused(lambda: admin.create_queue("-starts-with-a-hyphen"), 400, "name")
        _refused(lambda: admin.create_queue("part", enable_partitioning=True), 400, "EnablePartitioning")
        _refused(lambda: admin.create_queue("loop", forward_to="loop"), 400, "itself")
        _refused(lambda: admin.create_queue("nowhere", forward_to="missing"), 400, "does not exist")
        _refused(
            lambda: admin.create_rule("results", "audit", "bad", filter=SqlRuleFilter("a = ")), 400, "rule"
        )
        work = admin.get_queue("work")
        _refused(lambda: admin.update_queue(work, requires_session=True), 400, "RequiresSession")
        assert admin.get_queue("work").requires_session is False  # nothing half-applied


def test_deleting_a_queue_drops_its_messages(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    with admin:
        admin.create_queue("scratch")
        with client.get_queue_sender("scratch") as sender:
            sender.send_messages(ServiceBusMessage("old"))
        admin.delete_queue("scratch")
        admin.create_queue("scratch")
        assert admin.get_queue_runtime_properties("scratch").total_message_count == 0


def test_management_changes_outlive_a_sigkill(tmp_path: Path) -> None:
    """Created, updated and deleted entities are stored before the answer, like Config.json's are
    loaded: after a SIGKILL and a restart on the same data they are as the client left them."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(emulator_config()))
    data = tmp_path / "data"
    first = start_process(config, data_dir=data)
    try:
        with (
            stock_admin_client(first) as admin,
            ServiceBusClient.from_connection_string(first.connection_string) as client,
        ):
            admin.create_queue("created", lock_duration=timedelta(seconds=30))
            admin.update_queue(admin.get_queue("work"), max_delivery_count=7)
            admin.delete_queue("dedup")
            admin.create_topic("events")
            admin.create_subscription("events", "all")
            admin.create_rule(
                "events", "all", "large", filter=SqlRuleFilter("amount > @limit", {"@limit": 100})
            )
            admin.delete_rule("events", "all", "$Default")
            admin.delete_subscription("results", "review")
            with client.get_queue_sender("created") as sender:
                sender.send_messages(ServiceBusMessage("kept"))
    finally:
        first.kill()
    with (
        start_process(config, data_dir=data) as second,
        stock_admin_client(second) as admin,
        ServiceBusClient.from_connection_string(second.connection_string) as client,
    ):
        assert admin.get_queue("created").lock_duration == timedelta(seconds=30)
        assert admin.get_queue("work").max_delivery_count == 7
        with pytest.raises(ResourceNotFoundError):
            admin.get_queue("dedup")
        assert [rule.name for rule in admin.list_rules("events", "all")] == ["large"]
        assert "review" not in [sub.name for sub in admin.list_subscriptions("results")]
        with client.get_queue_receiver("created", max_wait_time=5) as receiver:
            assert [str(message) for message in receiver.receive_messages(max_wait_time=5)] == ["kept"]
        with client.get_topic_sender("events") as sender:
            sender.send_messages(
                [ServiceBusMessage(str(n), application_properties={"amount": n}) for n in (5, 500)]
            )
        with client.get_subscription_receiver("events", "all", max_wait_time=5) as receiver:
            assert [
                str(message) for message in receiver.receive_messages(max_message_count=5, max_wait_time=5)
            ] == ["500"]


def test_a_receiver_of_a_deleted_queue_is_detached(
    admin: ServiceBusAdministrationClient, client: ServiceBusClient
) -> None:
    """As on Azure, deleting an entity ends the links attached to it: the SDK's next receive raises
    MessagingEntityNotFoundError instead of waiting on a queue that no longer exists."""
    with admin:
        admin.create_queue("doomed")
        with client.get_queue_receiver("doomed", max_wait_time=1) as receiver:
            assert receiver.receive_messages(max_wait_time=1) == []
            admin.delete_queue("doomed")
            with pytest.raises(MessagingEntityNotFoundError):
                receiver.receive_messages(max_wait_time=5)
