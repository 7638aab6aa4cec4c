"""The ATOM documents of Service Bus's HTTP management plane, rendered from the broker's state.

``ServiceBusAdministrationClient`` (any language) reads entities as ATOM entries and feeds whose
content is a ``QueueDescription``, ``TopicDescription``, ``SubscriptionDescription`` or
``RuleDescription`` in the ``servicebus/connect`` XML namespace, with the message counts in a
``CountDetails`` element of the 2011/06 namespace; these functions produce the same shapes from the
entities of Config.json. Pure functions of the broker's state: the HTTP side is ``management_http``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import isodate

from servicebus_emulator.broker import DEAD_LETTER_SUFFIX, Broker, Topic
from servicebus_emulator.config import QueueSettings
from servicebus_emulator.filters import CorrelationFilter, FalseFilter, Rule, SqlFilter, TrueFilter
from servicebus_emulator.model import ACTIVE, DEFERRED, SCHEDULED
from servicebus_emulator.queue import MessageQueue

ATOM = "http://www.w3.org/2005/Atom"
CONNECT = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
COUNTS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
INSTANCE = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = "http://www.w3.org/2001/XMLSchema"
# What the service shows for "no limit" (TimeSpan.MaxValue), e.g. an unlimited TTL or auto-delete.
UNLIMITED = "P10675199DT2H48M5.4775807S"
MAX_SIZE_MB = 1024


@dataclass(frozen=True)
class Page:
    """One page of a listing: the ``$skip``/``$top`` of the request and the link to the next page."""

    skip: int
    top: int
    base_url: str


def _duration(value: timedelta | None) -> str:
    return UNLIMITED if value is None else str(isodate.duration_isoformat(value))


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _elements(pairs: Iterable[tuple[str, Any]]) -> str:
    out = []
    for name, value in pairs:
        if value is None:
            continue
        text = _bool(value) if isinstance(value, bool) else escape(str(value))
        out.append(f"<{name}>{text}</{name}>")
    return "".join(out)


def _count_details(active: int, dead: int, scheduled: int) -> str:
    counts = (
        ("ActiveMessageCount", active),
        ("DeadLetterMessageCount", dead),
        ("ScheduledMessageCount", scheduled),
        ("TransferMessageCount", 0),
        ("TransferDeadLetterMessageCount", 0),
    )
    inner = "".join(f"<d2p1:{name}>{value}</d2p1:{name}>" for name, value in counts)
    return f'<CountDetails xmlns:d2p1="{COUNTS}">{inner}</CountDetails>'


@dataclass(frozen=True)
class _Counts:
    active: int
    dead: int
    scheduled: int
    deferred: int
    total: int
    size: int


def _counts(broker: Broker, queue: MessageQueue) -> _Counts:
    states = [entry.state for entry in queue.entries.values()]
    dead_letters = broker.queues.get(queue.path + DEAD_LETTER_SUFFIX)
    dead = len(dead_letters.entries) if dead_letters else 0
    size = sum(len(entry.message.body) for entry in queue.entries.values())
    return _Counts(
        active=states.count(ACTIVE),
        dead=dead,
        scheduled=states.count(SCHEDULED),
        deferred=states.count(DEFERRED),
        total=len(states) + dead,
        size=size,
    )


def _entry(url: str, title: str, started_ms: int, content: str) -> str:
    stamp = _time(started_ms)
    return (
        f'<entry xmlns="{ATOM}"><id>{escape(url)}</id><title type="text">{escape(title)}</title>'
        f"<published>{stamp}</published><updated>{stamp}</updated>"
        f'<author><name>sbemulatorns</name></author><link rel="self" href={quoteattr(url)}/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def _feed(url: str, title: str, started_ms: int, entries: list[str], page: Page, total: int) -> str:
    links = f'<link rel="self" href={quoteattr(url)}/>'
    if page.skip + page.top < total:  # the SDKs follow a second link as the next page
        following = f"{page.base_url}?$skip={page.skip + page.top}&$top={page.top}"
        links += f'<link rel="next" href={quoteattr(following)}/>'
    return (
        f'<feed xmlns="{ATOM}"><title type="text">{escape(title)}</title><id>{escape(url)}</id>'
        f"<updated>{_time(started_ms)}</updated>{links}{''.join(entries)}</feed>"
    )


def _stamps(started_ms: int) -> list[tuple[str, Any]]:
    stamp = _time(started_ms)
    return [("CreatedAt", stamp), ("UpdatedAt", stamp), ("AccessedAt", stamp)]


def queue_description(broker: Broker, queue: MessageQueue, started_ms: int) -> str:
    settings, counts = queue.settings, _counts(broker, queue)
    body = _elements(
        [
            ("LockDuration", _duration(settings.lock_duration)),
            ("MaxSizeInMegabytes", MAX_SIZE_MB),
            ("RequiresDuplicateDetection", settings.requires_duplicate_detection),
            ("RequiresSession", settings.requires_session),
            ("DefaultMessageTimeToLive", _duration(settings.default_ttl)),
            ("DeadLetteringOnMessageExpiration", settings.dead_lettering_on_expiration),
            ("DuplicateDetectionHistoryTimeWindow", _duration(settings.duplicate_window)),
            ("MaxDeliveryCount", settings.max_delivery_count),
            ("EnableBatchedOperations", True),
            ("SizeInBytes", counts.size),
            ("MessageCount", counts.total),
            ("IsAnonymousAccessible", False),
            ("Status", "Active"),
            ("ForwardTo", settings.forward_to),
            *_stamps(started_ms),
            ("SupportOrdering", True),
        ]
    )
    body += _count_details(counts.active, counts.dead, counts.scheduled)
    body += _elements(
        [
            ("AutoDeleteOnIdle", UNLIMITED),
            ("EnablePartitioning", False),
            ("EntityAvailabilityStatus", "Available"),
            ("ForwardDeadLetteredMessagesTo", settings.forward_dead_lettered_to),
            ("EnableExpress", False),
            ("MaxMessageSizeInKilobytes", broker.max_message_size_of(queue.path) // 1024),
        ]
    )
    return f'<QueueDescription xmlns="{CONNECT}" xmlns:i="{INSTANCE}">{body}</QueueDescription>'


def topic_description(broker: Broker, topic: Topic, started_ms: int) -> str:
    settings = topic.settings
    scheduled = len(topic.scheduled.entries)
    sql = sum(isinstance(rule.filter, SqlFilter) for sub in topic.subscriptions for rule in sub.rules)
    correlation = sum(
        isinstance(rule.filter, CorrelationFilter) for sub in topic.subscriptions for rule in sub.rules
    )
    body = _elements(
        [
            ("DefaultMessageTimeToLive", _duration(settings.default_ttl)),
            ("MaxSizeInMegabytes", MAX_SIZE_MB),
            ("RequiresDuplicateDetection", settings.requires_duplicate_detection),
            ("DuplicateDetectionHistoryTimeWindow", _duration(settings.duplicate_window)),
            ("EnableBatchedOperations", True),
            ("SizeInBytes", sum(len(entry.message.body) for entry in topic.scheduled.entries.values())),
            ("FilteringMessagesBeforePublishing", False),
            ("IsAnonymousAccessible", False),
            ("Status", "Active"),
            *_stamps(started_ms),
            ("SupportOrdering", True),
        ]
    )
    body += _count_details(0, 0, scheduled)
    body += _elements(
        [
            ("SubscriptionCount", len(topic.subscriptions)),
            ("SqlFilterCount", sql),
            ("CorrelationFilterCount", correlation),
            ("AutoDeleteOnIdle", UNLIMITED),
            ("EnablePartitioning", False),
            ("EntityAvailabilityStatus", "Available"),
            ("EnableSubscriptionPartitioning", False),
            ("EnableExpress", False),
            ("MaxMessageSizeInKilobytes", broker.max_message_size_of(topic.name) // 1024),
        ]
    )
    return f'<TopicDescription xmlns="{CONNECT}" xmlns:i="{INSTANCE}">{body}</TopicDescription>'


def subscription_description(broker: Broker, queue: MessageQueue, started_ms: int) -> str:
    settings: QueueSettings = queue.settings
    counts = _counts(broker, queue)
    body = _elements(
        [
            ("LockDuration", _duration(settings.lock_duration)),
            ("RequiresSession", settings.requires_session),
            ("DefaultMessageTimeToLive", _duration(settings.default_ttl)),
            ("DeadLetteringOnMessageExpiration", settings.dead_lettering_on_expiration),
            ("DeadLetteringOnFilterEvaluationExceptions", False),
            ("MessageCount", counts.total),
            ("MaxDeliveryCount", settings.max_delivery_count),
            ("EnableBatchedOperations", True),
            ("Status", "Active"),
            ("ForwardTo", settings.forward_to),
            *_stamps(started_ms),
        ]
    )
    body += _count_details(counts.active, counts.dead, counts.scheduled)
    body += _elements(
        [
            ("ForwardDeadLetteredMessagesTo", settings.forward_dead_lettered_to),
            ("AutoDeleteOnIdle", UNLIMITED),
            ("EntityAvailabilityStatus", "Available"),
        ]
    )
    return f'<SubscriptionDescription xmlns="{CONNECT}" xmlns:i="{INSTANCE}">{body}</SubscriptionDescription>'


def _value_type(value: Any) -> tuple[str, str]:
    """The XML Schema type and text of a correlation filter property (as the service writes it)."""
    if isinstance(value, bool):
        return "boolean", _bool(value)
    if isinstance(value, int):
        return ("int" if -(2**31) <= value < 2**31 else "long"), str(value)
    if isinstance(value, float):
        return "double", repr(value)
    return "string", str(value)


def _key_values(properties: Mapping[str, Any]) -> str:
    out = []
    for key, value in properties.items():
        kind, text = _value_type(value)
        out.append(
            f"<KeyValueOfstringanyType><Key>{escape(key)}</Key>"
            f'<Value xmlns:d6p1="{SCHEMA}" i:type="d6p1:{kind}">{escape(text)}</Value>'
            "</KeyValueOfstringanyType>"
        )
    return "".join(out)


def _filter(rule: Rule) -> str:
    found = rule.filter
    if isinstance(found, CorrelationFilter):
        fields = _elements(
            [
                ("CorrelationId", found.correlation_id),
                ("MessageId", found.message_id),
                ("To", found.to),
                ("ReplyTo", found.reply_to),
                ("Label", found.label),
                ("SessionId", found.session_id),
                ("ReplyToSessionId", found.reply_to_session_id),
                ("ContentType", found.content_type),
            ]
        )
        return (
            f'<Filter i:type="CorrelationFilter">{fields}'
            f"<Properties>{_key_values(found.properties)}</Properties></Filter>"
        )
    kind, expression = "SqlFilter", ""
    if isinstance(found, TrueFilter):
        kind, expression = "TrueFilter", "1=1"
    elif isinstance(found, FalseFilter):
        kind, expression = "FalseFilter", "1=0"
    elif isinstance(found, SqlFilter):
        expression = found.expression
    parameters = ""
    if isinstance(found, SqlFilter) and found.parameters:
        parameters = f"<Parameters>{_key_values(found.parameters)}</Parameters>"
    return (
        f'<Filter i:type="{kind}"><SqlExpression>{escape(expression)}</SqlExpression>'
        f"<CompatibilityLevel>20</CompatibilityLevel>{parameters}</Filter>"
    )


def rule_description(rule: Rule, started_ms: int) -> str:
    if rule.action is None:
        action = '<Action i:type="EmptyRuleAction"/>'
    else:
        action = (
            f'<Action i:type="SqlRuleAction"><SqlExpression>{escape(rule.action.expression)}'
            "</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Action>"
        )
    return (
        f'<RuleDescription xmlns="{CONNECT}" xmlns:i="{INSTANCE}">{_filter(rule)}{action}'
        f"<CreatedAt>{_time(started_ms)}</CreatedAt><Name>{escape(rule.name)}</Name></RuleDescription>"
    )


def namespace_info(name: str, started_ms: int, premium: bool) -> str:
    """``$namespaceinfo``: a Standard (or Premium) namespace of messaging entities."""
    stamp = _time(started_ms)
    body = _elements(
        [
            ("CreatedTime", stamp),
            ("MessagingSKU", "Premium" if premium else "Standard"),
            ("MessagingUnits", 1 if premium else None),
            ("ModifiedTime", stamp),
            ("Name", name),
            ("NamespaceType", "Messaging"),
        ]
    )
    return f'<NamespaceInfo xmlns="{CONNECT}" xmlns:i="{INSTANCE}">{body}</NamespaceInfo>'


def entry(url: str, title: str, started_ms: int, content: str) -> str:
    """One entity as an ATOM entry."""
    return _entry(url, title, started_ms, content)


def feed(url: str, title: str, started_ms: int, items: list[tuple[str, str, str]], page: Page) -> str:
    """A page of entities as an ATOM feed; ``items`` are (entry url, title, content) of all of them."""
    chosen = items[page.skip : page.skip + page.top]
    entries = [_entry(item_url, item_title, started_ms, content) for item_url, item_title, content in chosen]
    return _feed(url, title, started_ms, entries, page, len(items))


def error(code: int, detail: str) -> str:
    """The service's error body."""
    return f"<Error><Code>{code}</Code><Detail>{escape(detail)}</Detail></Error>"
