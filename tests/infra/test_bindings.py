"""The Function App's bindings agree with the topology and with the app settings the infra sets."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import azure.functions as func
import pytest
from claimcheck.settings import DOCUMENTS_QUEUE_SETTING, SETTINGS, ProvisionalTag, Settings

from infra.app_settings import AppEndpoints, AppIdentity, build_app_settings, topology_settings
from infra.bindings import check_bindings, functions_metadata
from infra.emulator_config import write_emulator_config
from infra.topology import Topology, load_topology
from local.functions_host import DEFAULT_APP
from local.functions_host.app_loader import (
    FunctionAppError,
    ServiceBusFunction,
    import_app,
    load_function_app,
)

TOPOLOGY = load_topology()


def _app_settings(topology: Topology = TOPOLOGY) -> dict[str, str]:
    endpoints = AppEndpoints(
        service_bus_fqdn="sb-test.servicebus.windows.net",
        payload_blob_uri="https://ccpaytest.blob.core.windows.net/",
        payload_table_uri="https://ccpaytest.table.core.windows.net/",
        host_storage_account="cchosttest",
        app_insights_connection_string="InstrumentationKey=00000000-0000-0000-0000-000000000000",
    )
    identity = AppIdentity(
        client_id="c1e70000-0000-4000-8000-0000000000b2", principal_id="aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    )
    return build_app_settings(endpoints, identity, topology, "test")


def _consumer_app(
    queue_name: str = "documents", *, sessions: bool = True, connection: str = "ServiceBusConnection"
) -> func.FunctionApp:
    app = func.FunctionApp()

    @app.service_bus_queue_trigger(
        arg_name="message", queue_name=queue_name, connection=connection, is_sessions_enabled=sessions
    )
    def consume(message: func.ServiceBusMessage) -> None:
        """A stand-in consumer."""

    return app


def _problems(app: func.FunctionApp, topology: Topology = TOPOLOGY) -> list[str]:
    return check_bindings(functions_metadata(app), topology, _app_settings(topology))


def test_matching_consumer_has_no_problem() -> None:
    """A session trigger on `documents` over ServiceBusConnection matches the infra."""
    assert _problems(_consumer_app()) == []


def test_renamed_queue_is_a_problem() -> None:
    """A trigger on a queue the topology does not declare is reported, naming the queue."""
    problems = _problems(_consumer_app("docs"))
    assert any("queue 'docs' is not in the topology" in problem for problem in problems)
    assert any("no Service Bus trigger consumes the documents queue 'documents'" in p for p in problems)


def test_topology_rename_without_app_change_is_a_problem() -> None:
    """Renaming the queue in the topology while the app keeps `documents` is reported."""
    renamed = load_topology(
        {"queues": [{"name": "intake", "requiresSession": True}], "bindings": {"documentsQueue": "intake"}}
    )
    assert _problems(_consumer_app(), renamed) == [
        "no Service Bus trigger consumes the documents queue 'intake'"
    ]


def test_session_flag_must_match_the_queue() -> None:
    """A non-session trigger on the session queue is reported."""
    (problem,) = _problems(_consumer_app(sessions=False))
    assert "is_sessions_enabled=False" in problem
    assert "requires_session=True" in problem


def test_app_setting_expressions_resolve_against_infra_settings() -> None:
    """`%CLAIMCHECK_DOCUMENTS_QUEUE%` resolves; a setting the infra does not set is reported."""
    assert _problems(_consumer_app("%CLAIMCHECK_DOCUMENTS_QUEUE%")) == []
    problems = _problems(_consumer_app("%DOCUMENTS_QUEUE_NAME%"))
    assert any("DOCUMENTS_QUEUE_NAME" in problem for problem in problems)


def test_connection_needs_identity_based_settings() -> None:
    """A connection name without `<name>__fullyQualifiedNamespace` in the app settings is reported."""
    (problem,) = _problems(_consumer_app(connection="LegacyServiceBus"))
    assert "LegacyServiceBus__fullyQualifiedNamespace" in problem


def test_connection_string_setting_is_a_problem() -> None:
    """A bare connection-name setting (a connection string) alongside the identity settings is reported."""
    settings = {**_app_settings(), "ServiceBusConnection": "Endpoint=sb://x/"}
    (problem,) = check_bindings(functions_metadata(_consumer_app()), TOPOLOGY, settings)
    assert "holds a connection string" in problem


def test_topic_subscription_and_blob_bindings_are_checked() -> None:
    """Topic triggers must name a declared subscription; blob paths a declared container."""
    app = _consumer_app()

    @app.service_bus_topic_trigger(
        arg_name="message", topic_name="results", subscription_name="audit", connection="ServiceBusConnection"
    )
    def audit(message: func.ServiceBusMessage) -> None:
        """Reads every result."""

    @app.service_bus_topic_trigger(
        arg_name="message",
        topic_name="results",
        subscription_name="billing",
        connection="ServiceBusConnection",
    )
    def billing(message: func.ServiceBusMessage) -> None:
        """Reads a subscription that does not exist."""

    @app.blob_trigger(arg_name="blob", path="uploads/{name}", connection="PayloadStorage")
    def uploaded(blob: func.InputStream) -> None:
        """Watches a container that does not exist."""

    problems = _problems(app)
    assert len(problems) == 2
    assert "subscription results/billing is not in the topology" in problems[0]
    assert "container 'uploads' is not in the topology" in problems[1]


def test_real_function_app_matches_the_topology() -> None:
    """functions/function_app.py's bindings match the default topology and the infra's app settings."""
    metadata = functions_metadata(import_app(DEFAULT_APP))
    assert check_bindings(metadata, TOPOLOGY, _app_settings()) == []
    # The trigger names the queue only through the app setting the topology fills.
    assert any(
        binding.get("queueName") == f"%{DOCUMENTS_QUEUE_SETTING}%"
        for function in metadata
        for binding in function.bindings
    )


def test_a_renamed_queue_reaches_the_trigger_the_app_settings_and_the_emulator_config(tmp_path: Path) -> None:
    """One source: renaming the documents queue in the topology moves the app setting the trigger's
    `%CLAIMCHECK_DOCUMENTS_QUEUE%` expression names (Azure's host and our local host resolve it), the
    infra app settings, the local stack's settings and the emulator's Config.json; nothing else changes."""
    renamed = load_topology(
        {"queues": [{"name": "intake", "requiresSession": True}], "bindings": {"documentsQueue": "intake"}}
    )
    azure = _app_settings(renamed)
    local = topology_settings(renamed, "local").to_env()
    assert azure[DOCUMENTS_QUEUE_SETTING] == local[DOCUMENTS_QUEUE_SETTING] == "intake"
    assert Settings.from_env(azure).documents_queue == "intake"
    # The deployed app, checked as the host resolves it against the infra's app settings.
    assert check_bindings(functions_metadata(import_app(DEFAULT_APP)), renamed, azure) == []
    # The local host resolves the trigger's expression with the local stack's settings before it listens.
    (consumer,) = load_function_app(DEFAULT_APP).of_type(ServiceBusFunction)
    assert consumer.queue_name == f"%{DOCUMENTS_QUEUE_SETTING}%"
    assert consumer.resolved(local).queue_name == "intake"
    config = json.loads(write_emulator_config(renamed, tmp_path / "Config.json", clamp=False).read_text())
    (namespace,) = config["UserConfig"]["Namespaces"]
    assert "intake" in {queue["Name"] for queue in namespace["Queues"]}
    # Without the setting the local host refuses to listen, naming it (Azure's host refuses to index).
    with pytest.raises(FunctionAppError, match=DOCUMENTS_QUEUE_SETTING):
        consumer.resolved({})


def test_the_settings_table_round_trips_and_names_every_field() -> None:
    """from_env(to_env(s)) == s for settings unlike the defaults; every Settings field has one row."""
    changed = replace(
        topology_settings(load_topology({"bindings": {"purposeContainers": {}}}), "prod", {"evidence": 30}),
        visibility_polls=9,
        purpose_consumers={"evidence-archive": frozenset({"a", "b"})},
        provisional_tag=ProvisionalTag("cc-publish", "pending"),
    )
    assert Settings.from_env(changed.to_env()) == changed
    assert Settings.from_env({}) == Settings.from_env(Settings.from_env({}).to_env())
    covered = {row.field.split(".")[0] for row in SETTINGS}
    assert covered == {declared.name for declared in fields(Settings)}
    assert len({row.name for row in SETTINGS}) == len(SETTINGS)


def test_the_example_local_settings_resolve_the_trigger() -> None:
    """functions/local.settings.example.json (Core Tools by hand) sets what the trigger's expression names."""
    example = json.loads(DEFAULT_APP.with_name("local.settings.example.json").read_text())["Values"]
    (consumer,) = load_function_app(DEFAULT_APP).of_type(ServiceBusFunction)
    assert consumer.resolved(example).queue_name == TOPOLOGY.bindings.documents_queue
