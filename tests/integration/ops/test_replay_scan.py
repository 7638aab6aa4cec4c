"""The dead-letter replay's scan (adapters/dead_letter_replay.replay_from, behind both
``claimcheck-ops dlq replay`` and ``POST /api/dead-letters/{n}/replay``) against the embedded emulator.

Service Bus cannot receive a message by sequence number, so a replay receives the messages ahead of
the wanted one and holds them locked until the end. Found in review: when reaching the wanted one took
longer than the queue's lock duration, the first held messages came back (their locks expired) and
the scan received them again, and again: the replay never ended (an operator's request hung, the
messages ahead gained a delivery per round). A slow link stands in for a busy namespace: each receive
call takes longer, the broker and the SDK are the real ones.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver, ServiceBusSubQueue
from claimcheck.adapters.dead_letter_replay import ReplayResult, ReplayStatus, replay_from
from servicebus_emulator import start as start_emulator

QUEUE = "parked"
AHEAD = 45  # more than two receive batches of the scan
LOCK = "PT1S"  # the emulator's shortest lock, so that locks run out during the scan
RECEIVE_PAUSE_SECONDS = 0.8  # each receive call of the slow link: two batches outlast a lock
HANG_LIMIT_SECONDS = 120.0  # generous: only a scan that never ends gets near it


class SlowLink:
    """The real receiver, each receive call delayed as on a slow or busy link."""

    def __init__(self, receiver: ServiceBusReceiver) -> None:
        self._receiver = receiver

    def receive_messages(self, **options: Any) -> Any:
        time.sleep(RECEIVE_PAUSE_SECONDS)
        return self._receiver.receive_messages(**options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._receiver, name)


def _config() -> dict[str, Any]:
    queue = {
        "Name": QUEUE,
        "Properties": {
            "DeadLetteringOnMessageExpiration": False,
            "DefaultMessageTimeToLive": "PT1H",
            "LockDuration": LOCK,
            "MaxDeliveryCount": 10,
            "RequiresDuplicateDetection": False,
            "RequiresSession": False,
        },
    }
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [queue], "Topics": []}]}}


def _dead_letter_all(client: ServiceBusClient, count: int) -> None:
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages([ServiceBusMessage(b"{}", message_id=f"m-{n}") for n in range(count)])
    left = count
    with client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver:
        while left:
            batch = receiver.receive_messages(max_message_count=left, max_wait_time=5)
            assert batch, "the messages were not all received"
            for message in batch:
                receiver.dead_letter_message(message, reason="invalid_envelope")
            left -= len(batch)


def _replay(client: ServiceBusClient, sequence_number: int, *, slow: bool) -> list[ReplayResult]:
    with (
        client.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0) as dlq,
        client.get_queue_sender(QUEUE) as sender,
    ):
        receiver = cast(ServiceBusReceiver, SlowLink(dlq)) if slow else dlq
        return replay_from(receiver, sender, QUEUE, [sequence_number], limit=1)


def test_a_replay_ends_when_the_messages_ahead_of_it_outlast_their_locks() -> None:
    with (
        start_emulator(_config()) as running,
        ServiceBusClient.from_connection_string(running.connection_string) as client,
    ):
        _dead_letter_all(client, AHEAD + 1)
        with client.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as peeker:
            dead = peeker.peek_messages(AHEAD + 1)
        wanted = max(int(message.sequence_number or 0) for message in dead)

        ended: list[list[ReplayResult]] = []
        scan = threading.Thread(target=lambda: ended.append(_replay(client, wanted, slow=True)), daemon=True)
        scan.start()
        scan.join(HANG_LIMIT_SECONDS)
        assert not scan.is_alive(), "the replay's scan never ended"
        [result] = ended[0]
        # Not reached in time: said so, nothing sent, the message left dead-lettered ...
        assert (result.status, result.replay_message_id) == (ReplayStatus.SEND_FAILED, None), result
        assert "lock" in result.detail
        # ... so that the replay, asked again on a link that keeps up, sends it exactly once.
        [again] = _replay(client, wanted, slow=False)
        assert again.status is ReplayStatus.REPLAYED, again
