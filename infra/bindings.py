"""Checks that the Function App's bindings match the topology and the app settings the infra sets.

A renamed queue, a session flag that disagrees with the queue, or a connection name without its
identity-based settings must fail a test, not a deployment. `check_bindings` is pure: it reads
function.json-shaped metadata (what `functions_metadata(app)` extracts from an
`azure.functions.FunctionApp`) and returns a list of problems, empty when all is well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from azure.functions import FunctionRegister

from infra.topology import Topology

# What the host needs, per binding kind, to build an identity-based client for a connection name.
SERVICE_BUS_IDENTITY_SETTING = "fullyQualifiedNamespace"
BLOB_IDENTITY_SETTINGS = ("blobServiceUri", "serviceUri")
TABLE_IDENTITY_SETTING = "tableServiceUri"
DEFAULT_SERVICE_BUS_CONNECTION = "AzureWebJobsServiceBus"  # the host's default when none is named
DEFAULT_STORAGE_CONNECTION = "AzureWebJobsStorage"

_APP_SETTING_EXPRESSION = re.compile(r"%([^%]+)%")


@dataclass(frozen=True)
class FunctionMetadata:
    name: str
    bindings: tuple[Mapping[str, Any], ...]


def functions_metadata(app: FunctionRegister) -> list[FunctionMetadata]:
    """function.json-shaped bindings of every function registered on an azure.functions app."""
    return [
        FunctionMetadata(
            name=str(function.get_function_name()), bindings=tuple(function.get_bindings_dict()["bindings"])
        )
        for function in app.get_functions()
    ]


def check_bindings(
    functions: Iterable[FunctionMetadata], topology: Topology, app_settings: Mapping[str, str]
) -> list[str]:
    """Problems between the app's bindings and the topology/app settings; empty means they match."""
    checker = _Checker(topology, app_settings)
    for function in functions:
        for binding in function.bindings:
            checker.check(function.name, binding)
    checker.check_documents_queue_is_consumed()
    return checker.problems


class _Checker:
    def __init__(self, topology: Topology, app_settings: Mapping[str, str]) -> None:
        self.topology = topology
        self.app_settings = app_settings
        self.problems: list[str] = []
        self._consumed_queues: set[str] = set()

    def check(self, function: str, binding: Mapping[str, Any]) -> None:
        kind = str(binding.get("type", ""))
        where = f"function {function!r} binding {binding.get('name')!r} ({kind})"
        if kind in ("serviceBusTrigger", "serviceBus"):
            self._service_bus(where, binding, is_trigger=kind == "serviceBusTrigger")
        elif kind in ("blobTrigger", "blob"):
            self._connection(where, binding, DEFAULT_STORAGE_CONNECTION, BLOB_IDENTITY_SETTINGS)
            path = self._resolve(where, "path", binding.get("path"))
            container = path.split("/", 1)[0] if path else None
            if container is not None and container not in self.topology.containers:
                self.problems.append(
                    f"{where}: container {container!r} is not in the topology "
                    f"(containers: {list(self.topology.containers)})"
                )
        elif kind == "table":
            self._connection(where, binding, DEFAULT_STORAGE_CONNECTION, (TABLE_IDENTITY_SETTING,))
            table = self._resolve(where, "tableName", binding.get("tableName"))
            if table is not None and table not in self.topology.tables.all():
                self.problems.append(
                    f"{where}: table {table!r} is not in the topology "
                    f"(tables: {list(self.topology.tables.all())})"
                )

    def _service_bus(self, where: str, binding: Mapping[str, Any], *, is_trigger: bool) -> None:
        self._connection(where, binding, DEFAULT_SERVICE_BUS_CONNECTION, (SERVICE_BUS_IDENTITY_SETTING,))
        sessions = bool(binding.get("isSessionsEnabled", False))
        if binding.get("queueName") is not None:
            queue_name = self._resolve(where, "queueName", binding["queueName"])
            if queue_name is None:
                return
            queues = {queue.name: queue for queue in self.topology.queues}
            if queue_name not in queues:
                self.problems.append(
                    f"{where}: queue {queue_name!r} is not in the topology (queues: {sorted(queues)})"
                )
            elif is_trigger:
                self._consumed_queues.add(queue_name)
                self._sessions(where, f"queue {queue_name!r}", sessions, queues[queue_name].requires_session)
            return
        topic_name = self._resolve(where, "topicName", binding.get("topicName"))
        if topic_name is None:
            self.problems.append(f"{where}: names neither queueName nor topicName")
            return
        topics = {topic.name: topic for topic in self.topology.topics}
        if topic_name not in topics:
            self.problems.append(
                f"{where}: topic {topic_name!r} is not in the topology (topics: {sorted(topics)})"
            )
            return
        if not is_trigger:
            return
        subscription_name = self._resolve(where, "subscriptionName", binding.get("subscriptionName"))
        subscriptions = {sub.name: sub for sub in topics[topic_name].subscriptions}
        if subscription_name not in subscriptions:
            self.problems.append(
                f"{where}: subscription {topic_name}/{subscription_name} is not in the "
                f"topology (subscriptions: {sorted(subscriptions)})"
            )
            return
        self._sessions(
            where,
            f"subscription {topic_name}/{subscription_name}",
            sessions,
            subscriptions[subscription_name].requires_session,
        )

    def _sessions(self, where: str, entity: str, enabled: bool, required: bool) -> None:
        if enabled != required:
            self.problems.append(
                f"{where}: is_sessions_enabled={enabled} but {entity} has requires_session={required}"
            )

    def _connection(
        self, where: str, binding: Mapping[str, Any], default: str, identity_settings: tuple[str, ...]
    ) -> None:
        name = self._resolve(where, "connection", binding.get("connection") or default)
        if name is None:
            return
        if not any(f"{name}__{setting}" in self.app_settings for setting in identity_settings):
            wanted = " or ".join(f"{name}__{setting}" for setting in identity_settings)
            self.problems.append(
                f"{where}: connection {name!r} has no identity-based setting ({wanted}) in the app settings"
            )
        if name in self.app_settings:
            self.problems.append(
                f"{where}: app setting {name!r} holds a connection string; use only "
                f"identity-based {name}__* settings"
            )

    def _resolve(self, where: str, field: str, value: object) -> str | None:
        """Resolves `%SETTING%` expressions against the app settings; None (and a problem) if missing."""
        if not isinstance(value, str):
            return None
        missing = [name for name in _APP_SETTING_EXPRESSION.findall(value) if name not in self.app_settings]
        if missing:
            self.problems.append(
                f"{where}: {field} {value!r} refers to app setting(s) {missing} that the "
                "infrastructure does not set"
            )
            return None
        return _APP_SETTING_EXPRESSION.sub(lambda match: self.app_settings[match.group(1)], value)

    def check_documents_queue_is_consumed(self) -> None:
        queue = self.topology.bindings.documents_queue
        if queue not in self._consumed_queues:
            self.problems.append(f"no Service Bus trigger consumes the documents queue {queue!r}")
