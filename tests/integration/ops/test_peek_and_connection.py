"""`peek` against the emulator, and how connection problems and other failures are reported."""

from __future__ import annotations

import json
import uuid

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusReceiveMode
from servicebus_emulator import DEFAULT_KEY, connection_string

from local.ports import free_port
from tests.integration.ops.bus import drain_session, publish
from tests.integration.ops.cli import run_main, run_ops


def test_peek_shows_metadata_only_and_leaves_the_message_in_place(servicebus_connection: str) -> None:
    """peek lists a subscription's message by id and metadata, without body bytes, and removes nothing."""
    sent = publish(servicebus_connection)
    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}

    first = run_ops("peek", "results", "--subscription", "audit", "--max", "1000", "--json", env=env)
    again = run_ops("peek", "results", "-s", "audit", "--max", "1000", env=env)

    assert first.exit_code == 0, first.output
    (row,) = [row for row in json.loads(first.stdout) if row["message_id"] == sent.message_id]
    assert row["state"] == "active"
    assert row["content_type"] == "application/json"
    assert "dead_letter_reason" in row
    assert row["dead_letter_reason"] is None
    assert again.exit_code == 0, again.output
    assert sent.message_id in again.stdout
    assert "PAYLOAD-BYTES" not in first.output + again.output


def test_peek_of_a_session_queue_browses_the_given_session(servicebus_connection: str) -> None:
    """peek --session lists that session's messages and leaves them to the consumer."""
    session = f"wi-{uuid.uuid4().hex[:12]}"
    sent = [publish(servicebus_connection, session_id=session) for _ in range(2)]

    result = run_ops(
        "peek", "documents", "--session", session, "--json", "--connection-string", servicebus_connection
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [row["message_id"] for row in rows] == [message.message_id for message in sent]
    assert {row["session_id"] for row in rows} == {session}
    assert "PAYLOAD-BYTES" not in result.output
    assert len(drain_session(servicebus_connection, session)) == 2


def test_peek_of_a_session_queue_without_session_browses_every_session(servicebus_connection: str) -> None:
    """Without --session, peek walks the sessions no consumer holds, and releases them: each message
    is still there for a consumer of its session, none received or counted as a delivery."""
    sessions = [f"wi-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    sent = [publish(servicebus_connection, session_id=session) for session in sessions]

    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}
    result = run_ops("peek", "documents", "--max", "1000", "--json", env=env)

    assert result.exit_code == 0, result.output
    rows = [row for row in json.loads(result.stdout) if row["session_id"] in sessions]
    assert [(row["message_id"], row["delivery_count"]) for row in rows] == [(m.message_id, 0) for m in sent]
    with ServiceBusClient.from_connection_string(servicebus_connection) as client:
        for session, message in zip(sessions, sent, strict=True):
            with client.get_queue_receiver(
                "documents", session_id=session, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
            ) as receiver:  # would fail with SessionCannotBeLockedError if peek still held it
                (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert (received.message_id, received.delivery_count) == (message.message_id, 0)


def test_peek_of_a_topic_without_subscription_says_to_give_one(servicebus_connection: str) -> None:
    """A topic has no messages of its own: the one-line not-found error says to pass --subscription
    and lists the topic's subscriptions (the repository's topology)."""
    result = run_ops("peek", "results", "--connection-string", servicebus_connection)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no such entity in the namespace: ")
    assert result.stderr.strip().endswith(
        "('results' is a topic, which holds no messages: give --subscription NAME, one of audit, "
        "contracts, notifications, review)"
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_connection_refused_is_a_one_line_error() -> None:
    """A broker that is not running gives one `error: cannot connect` line and exit code 1."""
    refused = connection_string(free_port(), DEFAULT_KEY)
    result = run_ops("dlq", "list", "documents", "--connection-string", refused)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot connect to Service Bus:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "SAS_KEY_VALUE" not in result.output


def test_a_connection_is_required() -> None:
    """Without a connection string or namespace the command says which settings are missing."""
    result = run_ops("peek", "documents")
    assert result.exit_code == 1
    assert "--connection-string" in result.stderr
    assert "CLAIMCHECK_SERVICEBUS_NAMESPACE" in result.stderr


def test_a_malformed_connection_string_is_one_line_that_does_not_echo_it() -> None:
    """`--connection-string garbage` used to print a 52-line traceback."""
    result = run_ops("peek", "documents", "--connection-string", "garbage-SECRET")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: --connection-string (CLAIMCHECK_SERVICEBUS_CONNECTION) is not a")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "SECRET" not in result.output


def test_an_unexpected_failure_is_still_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure nobody anticipated (here: a bug in the counting code) is one line, not a traceback."""

    def broken(*_: object) -> None:
        raise KeyError("Namespaces")

    monkeypatch.setattr("scripts.ops.entity_counts", broken)
    result = run_ops("stats", "--connection-string", connection_string(free_port(), DEFAULT_KEY))
    assert result.exit_code == 1
    assert result.stderr == "error: unexpected failure (KeyError): 'Namespaces'\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bogus"], "error: No such command 'bogus'. (see `claimcheck-ops --help`)"),
        (["send", "x.pdf"], "error: Missing option '--tenant'. (see `claimcheck-ops send --help`)"),
        (["dlq", "show", "documents", "abc"], "error: Invalid value for 'SEQUENCE_NUMBER'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console script (main) turns a usage error into one `error:` line naming the help to read."""
    assert run_main(*args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(expected)
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""


def test_no_arguments_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main() == 0
    assert "Usage: claimcheck-ops" in capsys.readouterr().out


def test_every_command_refuses_a_malformed_connection_string_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Also through the console script, for commands that check it outside their own error handling.
    (`smoke` takes no connection string: it goes through the deployed HTTP API only.)"""
    for args in (["stats"], ["dlq", "list", "documents"]):
        assert run_main(*args, "--connection-string", "garbage-SECRET") == 1, args
        err = capsys.readouterr().err
        assert err.startswith("error: --connection-string (CLAIMCHECK_SERVICEBUS_CONNECTION) is not a"), err
        assert len(err.strip().splitlines()) == 1
        assert "SECRET" not in err
