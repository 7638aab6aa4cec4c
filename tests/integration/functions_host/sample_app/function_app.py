"""A tiny function app that exercises every trigger the local host runs (used only by its tests).

Where the functions record what they saw comes from app settings, as a real app's outputs would.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import azure.functions as func
import grpc
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions, ServiceBusReceivedMessage
from azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions import SettlementError

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def _record(setting: str, line: dict[str, object]) -> None:
    with Path(os.environ[setting]).open("a", encoding="utf-8") as journal:
        journal.write(json.dumps(line) + "\n")


def _instance() -> dict[str, object]:
    """Which host instance runs this (set when the host runs several: local.functions_host.instances)."""
    instance = os.environ.get("WEBSITE_INSTANCE_ID")
    return {} if instance is None else {"instance": instance}


@app.route(route="instance", methods=["GET"])
def instance(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps({"instance": os.environ.get("WEBSITE_INSTANCE_ID")}), mimetype="application/json"
    )


@app.route(route="echo/{name}", methods=["POST"])
def echo(req: func.HttpRequest) -> func.HttpResponse:
    document = {
        "name": req.route_params["name"],
        "query": dict(req.params),
        "size": len(req.get_body()),
        "header": req.headers.get("x-sample"),
    }
    return func.HttpResponse(json.dumps(document), status_code=201, mimetype="application/json")


@app.route(route="declared", methods=["POST"])
def declared(req: func.HttpRequest) -> func.HttpResponse:
    """Answers from the headers alone and never reads the body, as intake refuses an oversized one."""
    document = {"declared": req.headers.get("content-length")}
    return func.HttpResponse(json.dumps(document), status_code=413, mimetype="application/json")


@app.route(route="explode", methods=["GET"])
def explode(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret-internal-detail")


@app.route(route="slow", methods=["GET"])
def slow(req: func.HttpRequest) -> func.HttpResponse:
    """Holds its invocation slot for ``seconds`` (to saturate the host's worker pool on purpose)."""
    time.sleep(float(req.params.get("seconds", "1")))
    return func.HttpResponse("done", status_code=200)


@app.timer_trigger(schedule="* * * * * *", arg_name="timer", run_on_startup=True)
def tick(timer: func.TimerRequest) -> None:
    _record("SAMPLE_TIMER_JOURNAL", {"past_due": timer.past_due, "at": time.time(), **_instance()})


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="orders",
    connection="SampleServiceBus",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def orders(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    body = b"".join(message.body).decode()
    if body == "poison":
        message_actions.deadletter(message, deadletter_reason="poison", deadletter_error_description="test")
        return
    crashed_once = Path(os.environ["SAMPLE_BUS_JOURNAL"] + ".crashed")
    if body == "crash" and not crashed_once.exists():
        crashed_once.touch()
        raise RuntimeError("the first delivery fails; the host must abandon it")
    _record(
        "SAMPLE_BUS_JOURNAL",
        {"session": message.session_id, "body": body, "deliveries": message.delivery_count, **_instance()},
    )
    message_actions.complete(message)


@app.service_bus_topic_trigger(
    arg_name="message", topic_name="events", subscription_name="all", connection="SampleServiceBus"
)
def events(message: ServiceBusReceivedMessage) -> None:
    _record("SAMPLE_BUS_JOURNAL", {"subscription": "all", "body": b"".join(message.body).decode()})


_running = 0
_running_lock = threading.Lock()


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="settlements",
    connection="SampleServiceBus",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def settlements(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    """Settles as the body says, through the extension's gRPC client, and records what happened."""
    global _running
    body = b"".join(message.body).decode()
    command, _, argument = body.partition(":")
    with _running_lock:
        _running += 1
        running = _running
    line: dict[str, object] = {
        "session": message.session_id,
        "body": body,
        "running": running,
        "receiver": message._receiver is not None,
        "actions": type(message_actions).__module__ + "." + type(message_actions).__name__,
    }
    try:
        first_time = Path(os.environ["SAMPLE_BUS_JOURNAL"] + "." + body)
        if command in ("sleep", "hold") or (command == "lost" and not first_time.exists()):
            first_time.touch()  # a message whose lock was lost comes back: it need not sleep again
            time.sleep(float(argument))
        if command == "abandon" and not Path(os.environ["SAMPLE_BUS_JOURNAL"] + "." + body).exists():
            Path(os.environ["SAMPLE_BUS_JOURNAL"] + "." + body).touch()
            message_actions.abandon(message)
            line["settled"] = "abandon"
        elif command == "deadletter":
            message_actions.deadletter(
                message, deadletter_reason=argument, deadletter_error_description="said so"
            )
            line["settled"] = "deadletter"
        elif command == "defer":
            message_actions.defer(message)
            line["settled"] = "defer"
            line["sequence_number"] = message.sequence_number
        else:
            if command == "state":
                message_actions.set_session_state(str(message.session_id), argument.encode())
            if command == "renew":
                locked_until = message_actions.renew_session_lock(str(message.session_id))
                line["renewed_until_ahead"] = locked_until.ToDatetime(tzinfo=UTC) > datetime.now(UTC)
            if command == "release":
                message_actions.release_session(str(message.session_id))
            message_actions.complete(message)
            line["settled"] = "complete"
    except SettlementError as error:
        original = error.original
        code = original.code() if isinstance(original, grpc.RpcError) else None
        line["error"] = [type(error).__name__, error.method, getattr(code, "name", None)]
    finally:
        with _running_lock:
            _running -= 1
    _record("SAMPLE_BUS_JOURNAL", line)
