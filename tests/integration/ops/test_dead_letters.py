"""`dlq list/show/replay` against the embedded emulator, driven through the real SDK."""

from __future__ import annotations

import hashlib
import json
import uuid

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageProperties

from tests.integration.ops.bus import (
    dead_letter_from_queue,
    dead_letter_from_replays,
    dead_letter_message_ids,
    drain_replays,
    drain_session,
)
from tests.integration.ops.cli import run_ops


def _session() -> str:
    return f"wi-{uuid.uuid4().hex[:12]}"


def test_dlq_list_shows_reason_and_description_but_no_body_bytes(servicebus_connection: str) -> None:
    """dlq list prints each dead-lettered message's reason and description, never its body."""
    session = _session()
    dead = dead_letter_from_queue(
        servicebus_connection, session_id=session, reason="integrity_failed", description="sha256 mismatch"
    )
    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}

    listed = run_ops("dlq", "list", "documents", "--max", "1000", "--json", env=env)
    table = run_ops("dlq", "list", "documents", "--max", "1000", env=env)

    assert listed.exit_code == 0, listed.output
    (row,) = [row for row in json.loads(listed.stdout) if row["message_id"] == dead.message_id]
    assert row["sequence_number"] == dead.sequence_number
    assert row["dead_letter_reason"] == "integrity_failed"
    assert row["dead_letter_description"] == "sha256 mismatch"
    assert row["session_id"] == session
    assert isinstance(row["delivery_count"], int)
    assert row["correlation_id"].startswith("corr-")
    assert row["enqueued_time"]
    assert table.exit_code == 0, table.output
    assert dead.message_id in table.stdout
    assert "integrity_failed" in table.stdout
    marker = dead.body.decode()[14:40]  # inside "PAYLOAD-BYTES-<hex>"
    assert marker not in listed.output
    assert marker not in table.output
    assert "PAYLOAD-BYTES" not in listed.output + table.output


def test_dlq_list_work_item_finds_its_dead_letters_behind_older_ones(servicebus_connection: str) -> None:
    """`--work-item` keeps that work item's dead letters wherever they stand: with more older dead
    letters than `--max`, the plain list (oldest first) never reaches it, as the README's walkthrough
    on a long-lived local stack found."""
    for _ in range(3):
        dead_letter_from_queue(servicebus_connection, session_id=_session(), reason="r", description="d")
    wanted = _session()
    dead = dead_letter_from_queue(servicebus_connection, session_id=wanted, reason="r", description="d")
    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}

    plain = run_ops("dlq", "list", "documents", "--max", "2", "--json", env=env)
    found = run_ops("dlq", "list", "documents", "--max", "2", "--work-item", wanted, "--json", env=env)

    assert plain.exit_code == 0, plain.output
    assert wanted not in {row["session_id"] for row in json.loads(plain.stdout)}
    assert found.exit_code == 0, found.output
    ((row),) = json.loads(found.stdout)
    assert row["session_id"] == wanted
    assert row["sequence_number"] == dead.sequence_number


def test_dlq_show_prints_routing_values_and_hides_other_properties(servicebus_connection: str) -> None:
    """dlq show gives routing property values, names other properties without values, and no body."""
    dead = dead_letter_from_queue(
        servicebus_connection,
        session_id=_session(),
        properties={"tenant": "acme", "priority": "high", "customer_note": "call me on 555-0100"},
    )
    result = run_ops(
        "dlq", "show", "documents", str(dead.sequence_number), "--json",
        "--connection-string", servicebus_connection,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["message_id"] == dead.message_id
    assert shown["dead_letter_reason"] == "invalid_envelope"
    assert shown["application_properties"] == {
        "customer_note": "(value not shown)",
        "priority": "high",
        "tenant": "acme",
    }
    assert "555-0100" not in result.output
    assert "PAYLOAD-BYTES" not in result.output


def test_dlq_show_of_a_sequence_number_not_in_the_dlq_exits_1(servicebus_connection: str) -> None:
    """dlq show of an absent sequence number is a one-line error."""
    result = run_ops("dlq", "show", "documents", "987654321", "--connection-string", servicebus_connection)
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == "error: sequence number 987654321 is not in the dead-letter queue of documents"
    )


def test_replay_moves_the_message_back_exactly_once(servicebus_connection: str) -> None:
    """Replay sends one copy with a deterministic id and removes it from the DLQ; replaying again fails."""
    session = _session()
    dead = dead_letter_from_queue(servicebus_connection, session_id=session)
    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}

    first = run_ops("dlq", "replay", "documents", str(dead.sequence_number), "--json", env=env)
    second = run_ops("dlq", "replay", "documents", str(dead.sequence_number), env=env)

    assert first.exit_code == 0, first.output
    (outcome,) = json.loads(first.stdout)
    expected_id = f"{dead.message_id}.replay.{dead.sequence_number}"
    assert outcome["status"] == "replayed"
    assert outcome["replay_message_id"] == expected_id
    assert second.exit_code == 1
    assert "not in the dead-letter queue" in second.stderr
    assert dead.message_id not in dead_letter_message_ids(servicebus_connection, "documents")
    (replayed,) = drain_session(servicebus_connection, session)
    assert replayed.message_id == expected_id
    assert b"".join(replayed.body) == dead.body
    assert replayed.session_id == session
    assert str(replayed.correlation_id).startswith("corr-")
    assert replayed.application_properties == {b"tenant": b"acme", b"priority": b"normal"}
    assert replayed.dead_letter_reason is None


def test_replay_after_a_crash_between_send_and_complete_adds_no_second_copy(
    servicebus_connection: str,
) -> None:
    """If an earlier replay sent its copy but died before completing, a rerun yields still one message."""
    session = _session()
    dead = dead_letter_from_queue(servicebus_connection, session_id=session)
    crashed_copy_id = f"{dead.message_id}.replay.{dead.sequence_number}"
    # What the crashed run had already sent:
    with (
        ServiceBusClient.from_connection_string(servicebus_connection) as client,
        client.get_queue_sender("documents") as sender,
    ):
        sender.send_messages(ServiceBusMessage(dead.body, message_id=crashed_copy_id, session_id=session))

    rerun = run_ops(
        "dlq", "replay", "documents", str(dead.sequence_number), "--connection-string", servicebus_connection
    )  # fmt: skip

    assert rerun.exit_code == 0, rerun.output
    assert dead.message_id not in dead_letter_message_ids(servicebus_connection, "documents")
    assert [message.message_id for message in drain_session(servicebus_connection, session)] == [
        crashed_copy_id
    ]


def test_replay_of_a_missing_sequence_number_exits_1_with_a_clear_message(servicebus_connection: str) -> None:
    """Replaying a sequence number that is not in the DLQ sends nothing and says so."""
    result = run_ops("dlq", "replay", "documents", "987654321", "--connection-string", servicebus_connection)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: sequence number 987654321: not in the dead-letter queue "
        "(replayed or removed, or locked by another receiver)"
    )
    assert "Traceback" not in result.output


def test_replay_all_sends_every_dead_lettered_subscription_message_back_to_the_topic(
    servicebus_connection: str,
) -> None:
    """dlq replay --all on a subscription empties its DLQ and delivers each message to it again once."""
    dead = [dead_letter_from_replays(servicebus_connection) for _ in range(2)]

    result = run_ops(
        "dlq", "replay", "results", "--subscription", "replays", "--all", "--json",
        "--connection-string", servicebus_connection,
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert {row["sequence_number"] for row in json.loads(result.stdout)} == {d.sequence_number for d in dead}
    assert dead_letter_message_ids(servicebus_connection, "results", "replays") == set()
    redelivered = sorted(str(message.message_id) for message in drain_replays(servicebus_connection))
    assert redelivered == sorted(f"{d.message_id}.replay.{d.sequence_number}" for d in dead)


def test_replay_needs_a_sequence_number_or_all() -> None:
    """replay with neither a sequence number nor --all (or both) is refused."""
    neither = run_ops(
        "dlq", "replay", "documents", "--connection-string", "Endpoint=sb://x;UseDevelopmentEmulator=true"
    )
    both = run_ops("dlq", "replay", "documents", "5", "--all", "--namespace", "ns.servicebus.windows.net")
    assert neither.exit_code == 1
    assert both.exit_code == 1
    assert neither.stderr.strip() == both.stderr.strip() == "error: give either a SEQUENCE_NUMBER or --all"


def test_an_unknown_entity_is_a_one_line_error(servicebus_connection: str) -> None:
    """dlq list of a queue the namespace does not have exits 1 with one error line and no traceback."""
    result = run_ops("dlq", "list", "no-such-queue", "--connection-string", servicebus_connection)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no such entity in the namespace")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def _same_id(listed: object, sent: bytes) -> bool:
    return listed == sent


def test_replay_of_a_binary_message_id_near_the_limit_sends_a_copy_with_a_short_text_id(
    servicebus_connection: str,
) -> None:
    """AMQP lets a sender write a binary message id; one that is not UTF-8 reaches us as bytes (the SDK
    decodes only UTF-8). Near 128 bytes it takes the long-id path, which must not call str methods on it."""
    session = _session()
    binary_id = uuid.uuid4().bytes + b"\xff" * 111  # 127 bytes, not UTF-8
    env = {"CLAIMCHECK_SERVICEBUS_CONNECTION": servicebus_connection}
    with ServiceBusClient.from_connection_string(servicebus_connection) as client:
        with client.get_queue_sender("documents") as sender:
            sender.send_messages(
                AmqpAnnotatedMessage(
                    data_body=b"{not json",
                    properties=AmqpMessageProperties(message_id=binary_id, group_id=session),
                )
            )
        with client.get_queue_receiver("documents", session_id=session, max_wait_time=5) as receiver:
            (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            as_handed_over: object = received.message_id  # typed str, but the SDK passes bytes on
            assert as_handed_over == binary_id
            receiver.dead_letter_message(received, reason="invalid_envelope", error_description="not json")
        with client.get_queue_receiver("documents", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = [
                m for m in dlq.peek_messages(max_message_count=250) if _same_id(m.message_id, binary_id)
            ]
            sequence_number = int(dead.sequence_number or 0)

    result = run_ops("dlq", "replay", "documents", str(sequence_number), "--json", env=env)

    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.stdout)
    expected_id = f"{hashlib.sha256(binary_id).hexdigest()}.replay.{sequence_number}"
    assert outcome["status"] == "replayed"
    assert outcome["replay_message_id"] == expected_id
    assert isinstance(outcome["original_message_id"], str)
    with (
        ServiceBusClient.from_connection_string(servicebus_connection) as client,
        client.get_queue_receiver("documents", session_id=session, max_wait_time=5) as receiver,
    ):
        (replayed,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(replayed)
    assert replayed.message_id == expected_id
