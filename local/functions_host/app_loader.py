"""Load a Python v2 programming-model function app and read its trigger metadata.

Core Tools indexes an app the same way: import the script with its folder on ``sys.path``, find the
one ``FunctionApp`` in it, and read each function's bindings (the JSON that ``function.json`` used to
hold). We parse that JSON rather than the decorator objects so that what we run is exactly what the
real host would be told.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import azure.functions as func
from azurefunctions.extensions.bindings.servicebus import ServiceBusConverter


class FunctionAppError(RuntimeError):
    """The function app cannot be loaded or declares something this host does not run."""


@dataclass(frozen=True)
class HttpFunction:
    name: str
    handler: Callable[..., Any]
    arg_name: str
    route: str
    methods: frozenset[str] | None  # None: every method


@dataclass(frozen=True)
class ServiceBusFunction:
    name: str
    handler: Callable[..., Any]
    arg_name: str
    connection: str
    queue_name: str | None
    topic_name: str | None
    subscription_name: str | None
    is_sessions_enabled: bool
    auto_complete_messages: bool | None  # None: host.json decides
    message_actions_arg: str | None  # the parameter typed ServiceBusMessageActions, if any
    trigger_annotation: object  # the trigger parameter's type, which the extension's converter decodes into

    def resolved(self, environ: Mapping[str, str]) -> ServiceBusFunction:
        """The function with `%NAME%` app setting expressions in its entity names replaced by their
        values, as the Functions host does before it listens (an unset one is refused, naming it)."""
        return replace(
            self,
            queue_name=_resolve_app_settings(self.name, "queueName", self.queue_name, environ),
            topic_name=_resolve_app_settings(self.name, "topicName", self.topic_name, environ),
            subscription_name=_resolve_app_settings(
                self.name, "subscriptionName", self.subscription_name, environ
            ),
        )

    @property
    def entity(self) -> str:
        if self.queue_name is not None:
            return self.queue_name
        return f"{self.topic_name}/subscriptions/{self.subscription_name}"


@dataclass(frozen=True)
class TimerFunction:
    name: str
    handler: Callable[..., Any]
    arg_name: str
    schedule: str
    run_on_startup: bool


TriggeredFunction = HttpFunction | ServiceBusFunction | TimerFunction
_Function = TypeVar("_Function", HttpFunction, ServiceBusFunction, TimerFunction)


@dataclass(frozen=True)
class FunctionApp:
    path: Path
    functions: tuple[TriggeredFunction, ...]

    def of_type(self, kind: type[_Function]) -> list[_Function]:
        return [function for function in self.functions if isinstance(function, kind)]


def load_function_app(path: Path, *, only: Collection[str] | None = None) -> FunctionApp:
    """Import the app script and return its functions (all, or those named in ``only``).

    Raises FunctionAppError naming the problem.
    """
    path = path.resolve()
    functions = tuple(_describe(function) for function in import_app(path).get_functions())
    if only is not None:
        unknown = set(only) - {function.name for function in functions}
        if unknown:
            raise FunctionAppError(f"{path} has no function named {', '.join(sorted(unknown))}")
        functions = tuple(function for function in functions if function.name in only)
    return FunctionApp(path=path, functions=functions)


def import_app(path: Path) -> func.FunctionRegister:
    """Execute the app script afresh and return its one FunctionApp.

    Afresh, because ``FunctionApp.get_functions()`` may be called only once per app object (a second
    call reports every function name as a duplicate).
    """
    path = path.resolve()
    if not path.is_file():
        raise FunctionAppError(f"function app script {path} does not exist")
    module = _import_script(path)
    registers = [value for value in vars(module).values() if isinstance(value, func.FunctionRegister)]
    if len(registers) != 1:
        raise FunctionAppError(f"{path} must define exactly one FunctionApp, found {len(registers)}")
    return registers[0]


def _import_script(path: Path) -> ModuleType:
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise FunctionAppError(f"{path} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _describe(function: func.Function) -> TriggeredFunction:
    name = str(function.get_function_name())
    handler = function.get_user_function()
    bindings = [json.loads(raw) for raw in function.get_raw_bindings()]
    triggers = [binding for binding in bindings if str(binding["type"]).endswith("Trigger")]
    if len(triggers) != 1:
        raise FunctionAppError(f"function {name} must have exactly one trigger, found {len(triggers)}")
    trigger = triggers[0]
    kind = trigger["type"]
    if kind == "httpTrigger":
        methods = trigger.get("methods")
        return HttpFunction(
            name=name,
            handler=handler,
            arg_name=trigger["name"],
            route=str(trigger.get("route") or name),
            methods=frozenset(str(method).upper() for method in methods) if methods else None,
        )
    if kind == "serviceBusTrigger":
        annotation = _parameter_annotation(handler, trigger["name"])
        if not ServiceBusConverter.check_input_type_annotation(annotation):
            # The worker's other path (func.ServiceBusMessage, str, bytes) is not run by this host.
            raise FunctionAppError(
                f"function {name}: annotate {trigger['name']!r} with "
                "azurefunctions.extensions.bindings.servicebus.ServiceBusReceivedMessage"
            )
        if str(trigger.get("cardinality", "one")).lower() != "one":
            raise FunctionAppError(f"function {name}: cardinality 'many' is not supported by the local host")
        return ServiceBusFunction(
            name=name,
            handler=handler,
            arg_name=trigger["name"],
            connection=str(trigger.get("connection") or "AzureWebJobsServiceBus"),
            queue_name=trigger.get("queueName"),
            topic_name=trigger.get("topicName"),
            subscription_name=trigger.get("subscriptionName"),
            is_sessions_enabled=bool(trigger.get("isSessionsEnabled", False)),
            auto_complete_messages=trigger.get("autoCompleteMessages"),
            message_actions_arg=_message_actions_parameter(handler),
            trigger_annotation=annotation,
        )
    if kind == "timerTrigger":
        return TimerFunction(
            name=name,
            handler=handler,
            arg_name=trigger["name"],
            schedule=str(trigger["schedule"]),
            run_on_startup=bool(trigger.get("runOnStartup", False)),
        )
    raise FunctionAppError(f"function {name}: trigger type {kind!r} is not supported by the local host")


_APP_SETTING_EXPRESSION = re.compile(r"%([^%]+)%")


def _resolve_app_settings(
    function: str, key: str, value: str | None, environ: Mapping[str, str]
) -> str | None:
    """`%NAME%` in a binding property is the app setting NAME, as the Functions host resolves it (e.g.
    the queue of a Service Bus trigger); an unset one stops the function's listener, naming it."""
    if value is None:
        return value

    def setting(match: re.Match[str]) -> str:
        found = environ.get(match.group(1))
        if found is None:
            raise FunctionAppError(
                f"function {function}: {key} {value!r} names app setting {match.group(1)!r}, which is not set"
            )
        return found

    return _APP_SETTING_EXPRESSION.sub(setting, value)


def _parameter_annotation(handler: Callable[..., Any], parameter_name: str) -> object:
    try:
        hints = typing.get_type_hints(handler)
    except (NameError, TypeError):
        hints = {}
    parameter = inspect.signature(handler).parameters.get(parameter_name)
    if parameter is None:
        raise FunctionAppError(f"{handler.__name__} has no parameter {parameter_name!r} for its trigger")
    annotation: object = hints.get(parameter_name, parameter.annotation)
    return annotation


def _message_actions_parameter(handler: Callable[..., Any]) -> str | None:
    """The worker injects settlement actions into the parameter annotated ServiceBusMessageActions."""
    try:
        hints = typing.get_type_hints(handler)
    except (NameError, TypeError):
        hints = {}
    for parameter in inspect.signature(handler).parameters.values():
        annotation = hints.get(parameter.name, parameter.annotation)
        annotation_name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if str(annotation_name).rsplit(".", 1)[-1] == "ServiceBusMessageActions":
            return parameter.name
    return None
