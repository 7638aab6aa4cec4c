"""Dead-letter counts through the Service Bus management plane (the reconciler's ``DeadLetterSource``).

Counts are the entities' runtime properties read with ``ServiceBusAdministrationClient``, the one path
``claimcheck-ops stats`` uses too (Azure, and the emulator's ATOM management plane locally); the age is
the enqueue time of the first message peeked from the dead-letter subqueue (peek never locks or
settles, and the subqueue keeps dead-letter order, so its first message is the oldest there).
Both clients are built by the caller: managed identity on Azure, connection strings locally. A failed
read raises ``BrokerUnavailable`` or ``BrokerFailed`` (adapters/sdk_errors.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from azure.servicebus import ServiceBusClient, ServiceBusSubQueue
from azure.servicebus.management import ServiceBusAdministrationClient

from claimcheck.adapters.sdk_errors import bus_errors
from claimcheck.deadletters import DeadLetterCount


class ServiceBusDeadLetters:
    def __init__(
        self,
        admin: ServiceBusAdministrationClient,
        client: ServiceBusClient,
        *,
        queues: Sequence[str],
        subscriptions: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._admin = admin
        self._client = client
        self._queues = tuple(queues)
        self._subscriptions = tuple(subscriptions)

    def dead_letter_counts(self) -> list[DeadLetterCount]:
        with bus_errors("dead-letter counts"):
            return self._counts()

    def _counts(self) -> list[DeadLetterCount]:
        counts = []
        for queue in self._queues:
            count = self._admin.get_queue_runtime_properties(queue).dead_letter_message_count or 0
            counts.append(DeadLetterCount(queue, count, self._oldest(count, queue_name=queue)))
        for topic, subscription in self._subscriptions:
            properties = self._admin.get_subscription_runtime_properties(topic, subscription)
            count = properties.dead_letter_message_count or 0
            oldest = self._oldest(count, topic_name=topic, subscription_name=subscription)
            counts.append(DeadLetterCount(f"{topic}/{subscription}", count, oldest))
        return counts

    def _oldest(self, count: int, **entity: str) -> datetime | None:
        if count == 0:
            return None
        if "queue_name" in entity:
            receiver = self._client.get_queue_receiver(
                entity["queue_name"], sub_queue=ServiceBusSubQueue.DEAD_LETTER
            )
        else:
            receiver = self._client.get_subscription_receiver(
                entity["topic_name"], entity["subscription_name"], sub_queue=ServiceBusSubQueue.DEAD_LETTER
            )
        with receiver:
            first = receiver.peek_messages(max_message_count=1)
        return first[0].enqueued_time_utc if first else None
