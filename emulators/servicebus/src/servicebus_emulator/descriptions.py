"""Request bodies of the management plane's create and update: an ATOM entry whose content is a
``QueueDescription``, ``TopicDescription``, ``SubscriptionDescription`` or ``RuleDescription``
(the shapes ``atom`` renders), read into settings with Azure's validation.

What Azure refuses is refused with its status (400, naming the property and the reason): an
unknown element, a bad duration, a lock duration outside 5 s - 5 min, a duplicate-detection window
outside 20 s - 7 days, a MaxDeliveryCount below 1, an invalid name, an invalid SQL filter or
action, a change of RequiresSession or RequiresDuplicateDetection on an existing entity, a forward
to itself, an entity's own message size (MaxMessageSizeInKilobytes) outside Premium or outside
1 - 100 MB. What the emulator does not implement (partitioning, express, auto-delete on idle, a
status other than Active, authorization rules, user metadata, a size quota in megabytes) is
refused with a 400 that says so, never accepted and ignored.
Properties absent from a description take Azure's defaults (lock 1 min, MaxDeliveryCount 10, no
TTL, a 10 min duplicate window), as the service's create does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from xml.etree import ElementTree

import isodate

from servicebus_emulator.config import QueueSettings, TopicSettings
from servicebus_emulator.filters import (
    CorrelationFilter,
    FalseFilter,
    Filter,
    FilterError,
    Rule,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
)

CONNECT = "{http://schemas.microsoft.com/netservices/2010/10/servicebus/connect}"
ATOM = "{http://www.w3.org/2005/Atom}"
INSTANCE_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"
UNLIMITED_PREFIX = "P10675199D"  # TimeSpan.MaxValue, the service's "no limit"
LOCK_RANGE = (timedelta(seconds=5), timedelta(minutes=5))
DUPLICATE_WINDOW_RANGE = (timedelta(seconds=20), timedelta(days=7))
TTL_RANGE = (timedelta(seconds=1), None)
MAX_SIZE_MB = 1024
PREMIUM_MESSAGE_KB = (1024, 102400)  # 1 MB to 100 MB
# Queue and topic names: letters, digits, periods, hyphens, underscores (and slashes, which the
# emulator does not take), starting and ending with a letter or digit, up to 260 characters.
ENTITY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,258}[A-Za-z0-9])?")
# Subscription and rule names: the same characters without slashes, up to 50 ($Default included).
CHILD_NAME = re.compile(r"(?:\$Default|[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?)")


@dataclass(frozen=True)
class SizeLimits:
    """The namespace's message size: in Premium an entity may set its own, 1 - 100 MB (Azure's
    MaxMessageSizeInKilobytes); in Standard only the namespace's (256 KB) is valid."""

    premium: bool
    namespace_kb: int

    def parse(self, text: str) -> int | None:
        if not text.isdigit():
            raise bad_request(f"The value '{text}' of MaxMessageSizeInKilobytes is not an integer.")
        value = int(text)
        if value == self.namespace_kb:
            return None  # the namespace's own limit
        if not self.premium:
            raise bad_request("MaxMessageSizeInKilobytes can only be set on entities of a Premium namespace.")
        if not PREMIUM_MESSAGE_KB[0] <= value <= PREMIUM_MESSAGE_KB[1]:
            low, high = PREMIUM_MESSAGE_KB
            raise bad_request(
                f"The value '{value}' of MaxMessageSizeInKilobytes must be between {low} and {high}."
            )
        return value


class ManagementError(Exception):
    """A refused management request: its HTTP status and the service-style detail."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def bad_request(detail: str) -> ManagementError:
    return ManagementError(
        400, f"{detail} SubCode=40000. To know more visit https://aka.ms/sbResourceMgrExceptions."
    )


def check_name(name: str, what: str, *, child: bool = False) -> None:
    pattern = CHILD_NAME if child else ENTITY_NAME
    if not pattern.fullmatch(name):
        limit = 50 if child else 260
        raise bad_request(
            f"The {what} name '{name}' is invalid: use letters, digits, periods, hyphens and underscores, "
            f"start and end with a letter or digit, at most {limit} characters."
        )


def description(body: bytes) -> ElementTree.Element:
    """The description inside the request's ATOM entry (its tag says which: ``QueueDescription``...)."""
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:  # no entity expansion, ever
        raise bad_request("The request body must not declare a DOCTYPE or entities.")
    try:
        root = ElementTree.fromstring(body)  # noqa: S314 - DOCTYPE/ENTITY refused above; 1 MiB cap
    except ElementTree.ParseError as exc:
        raise bad_request(f"The request body is not well-formed XML: {exc}.") from None
    content = root.find(f"{ATOM}content")
    if root.tag != f"{ATOM}entry" or content is None or len(content) != 1:
        raise bad_request("The request body must be an ATOM entry with one description as its content.")
    return content[0]


def kind_of(node: ElementTree.Element) -> str:
    """``QueueDescription``, ``TopicDescription``, ... (any other content is refused by the caller)."""
    return node.tag.removeprefix(CONNECT)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _text(node: ElementTree.Element) -> str:
    return (node.text or "").strip()


def _duration(name: str, bounds: tuple[timedelta, timedelta | None]) -> Callable[[str], timedelta | None]:
    """The parser of a duration; the range is checked by ``_check_ranges`` (an existing entity from
    Config.json may keep a value below Azure's minimum that the emulator accepts there)."""

    def parse(text: str) -> timedelta | None:
        if text.startswith(UNLIMITED_PREFIX):
            value = None
        else:
            try:
                parsed = isodate.parse_duration(text)
            except (isodate.ISO8601Error, ValueError):
                parsed = None
            if not isinstance(parsed, timedelta):
                raise bad_request(f"The value '{text}' of {name} is not an ISO 8601 duration.")
            value = parsed
        return value

    return parse


def _boolean(name: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        if text not in ("true", "false"):
            raise bad_request(f"The value '{text}' of {name} is not a boolean.")
        return text == "true"

    return parse


def _delivery_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise bad_request(
            f"The value '{text}' of MaxDeliveryCount is invalid: it must be an integer of at least 1."
        )
    return int(text)


def _forward(text: str) -> str | None:
    """A forward target: a name, or the full URL the SDK makes of it (``sb://ns/name``)."""
    if not text:
        return None
    return text.split("://", 1)[1].split("/", 1)[1].strip("/") if "://" in text else text


_QUEUE_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "LockDuration": ("lock_duration", _duration("LockDuration", LOCK_RANGE)),
    "MaxDeliveryCount": ("max_delivery_count", _delivery_count),
    "DefaultMessageTimeToLive": ("default_ttl", _duration("DefaultMessageTimeToLive", TTL_RANGE)),
    "DeadLetteringOnMessageExpiration": (
        "dead_lettering_on_expiration",
        _boolean("DeadLetteringOnMessageExpiration"),
    ),
    "RequiresSession": ("requires_session", _boolean("RequiresSession")),
    "RequiresDuplicateDetection": ("requires_duplicate_detection", _boolean("RequiresDuplicateDetection")),
    "DuplicateDetectionHistoryTimeWindow": (
        "duplicate_window",
        _duration("DuplicateDetectionHistoryTimeWindow", DUPLICATE_WINDOW_RANGE),
    ),
    "ForwardTo": ("forward_to", _forward),
    "ForwardDeadLetteredMessagesTo": ("forward_dead_lettered_to", _forward),
}
_SUBSCRIPTION_FIELDS = {
    key: value
    for key, value in _QUEUE_FIELDS.items()
    if key not in {"RequiresDuplicateDetection", "DuplicateDetectionHistoryTimeWindow"}
}
_TOPIC_FIELDS = {
    key: _QUEUE_FIELDS[key]
    for key in (
        "DefaultMessageTimeToLive",
        "RequiresDuplicateDetection",
        "DuplicateDetectionHistoryTimeWindow",
    )
}
# Output only (counts, times, availability) or without effect here (the emulator always batches
# and orders; filter evaluation never throws): read back from a get and sent again by an update.
_IGNORED = {
    "AccessedAt",
    "CountDetails",
    "CreatedAt",
    "EnableBatchedOperations",
    "EntityAvailabilityStatus",
    "IsAnonymousAccessible",
    "MessageCount",
    "SizeInBytes",
    "SubscriptionCount",
    "SqlFilterCount",
    "CorrelationFilterCount",
    "SupportOrdering",
    "UpdatedAt",
    "DeadLetteringOnFilterEvaluationExceptions",
    "FilteringMessagesBeforePublishing",
}


def _fixed() -> dict[str, Callable[[str], bool]]:
    """Properties the emulator serves one value of: any other value is refused, never ignored."""
    return {
        "Status": lambda text: text == "Active",
        "AutoDeleteOnIdle": lambda text: text.startswith(UNLIMITED_PREFIX),
        "EnablePartitioning": lambda text: text == "false",
        "EnableSubscriptionPartitioning": lambda text: text == "false",
        "EnableExpress": lambda text: text == "false",
        "UserMetadata": lambda text: text == "",
        "MaxSizeInMegabytes": lambda text: text == str(MAX_SIZE_MB),
    }


def _read(
    node: ElementTree.Element,
    fields: Mapping[str, tuple[str, Callable[[str], Any]]],
    size: SizeLimits,
    extra: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    fixed = _fixed()
    values: dict[str, Any] = {}
    for child in node:
        name = _local(child.tag)
        if name in fields:
            attribute, parse = fields[name]
            values[attribute] = parse(_text(child))
        elif name == "MaxMessageSizeInKilobytes":
            values["max_message_size_kb"] = size.parse(_text(child))
        elif name == "AuthorizationRules":
            if len(child):
                raise bad_request("AuthorizationRules are not supported by the emulator (SAS: its one key).")
        elif name in fixed:
            if not fixed[name](_text(child)):
                raise bad_request(f"{name} = '{_text(child)}' is not supported by the emulator.")
        elif name not in _IGNORED and name not in extra:
            raise bad_request(f"The property {name} is not known for this entity.")
    return values


_RANGES = (
    ("lock_duration", "LockDuration", LOCK_RANGE),
    ("default_ttl", "DefaultMessageTimeToLive", TTL_RANGE),
    ("duplicate_window", "DuplicateDetectionHistoryTimeWindow", DUPLICATE_WINDOW_RANGE),
)


def _check_ranges(old: QueueSettings | TopicSettings | None, new: QueueSettings | TopicSettings) -> None:
    """Azure's ranges for every duration a request sets (a value an entity already has is kept)."""
    for attribute, name, (low, high) in _RANGES:
        if not hasattr(new, attribute):
            continue
        value = getattr(new, attribute)
        if old is not None and getattr(old, attribute) == value:
            continue
        if value is None and high is not None:
            raise bad_request(f"{name} must be between {low} and {high}.")
        if value is not None and (value < low or (high is not None and value > high)):
            limit = f"between {low} and {high}" if high else f"at least {low}"
            shown = isodate.duration_isoformat(value)
            raise bad_request(f"The value '{shown}' of {name} is out of range: it must be {limit}.")


def _check_unchanged(
    old: QueueSettings | TopicSettings | None, new: QueueSettings | TopicSettings, kind: str
) -> None:
    if old is None:
        return
    for attribute, name in (
        ("requires_session", "RequiresSession"),
        ("requires_duplicate_detection", "RequiresDuplicateDetection"),
    ):
        if getattr(old, attribute, None) != getattr(new, attribute, None):
            raise bad_request(f"The value for the {name} property of an existing {kind} cannot be changed.")


def queue_settings(
    node: ElementTree.Element,
    existing: QueueSettings | None,
    size: SizeLimits,
    *,
    subscription: bool = False,
) -> QueueSettings:
    fields = _SUBSCRIPTION_FIELDS if subscription else _QUEUE_FIELDS
    extra = frozenset({"DefaultRuleDescription"}) if subscription else frozenset()
    settings = replace(QueueSettings(), **_read(node, fields, size, extra))
    _check_ranges(existing, settings)
    _check_unchanged(existing, settings, "Subscription" if subscription else "Queue")
    return settings


def topic_settings(
    node: ElementTree.Element, existing: TopicSettings | None, size: SizeLimits
) -> TopicSettings:
    settings = replace(TopicSettings(), **_read(node, _TOPIC_FIELDS, size))
    _check_ranges(existing, settings)
    _check_unchanged(existing, settings, "Topic")
    return settings


# --- rules -----------------------------------------------------------------------------------------


def _typed_value(node: ElementTree.Element) -> Any:
    kind = _local(node.get(INSTANCE_TYPE, "string")).split(":")[-1]
    text = node.text or ""
    try:
        if kind == "boolean":
            return text.strip() == "true"
        if kind in ("int", "long", "short", "byte", "unsignedInt", "unsignedShort"):
            return int(text)
        if kind in ("double", "float", "decimal"):
            return float(text)
    except ValueError:
        raise bad_request(f"The value '{text}' is not a valid {kind}.") from None
    if kind != "string":
        raise bad_request(f"Values of type {kind} are not supported by the emulator in filters.")
    return text


def _key_values(node: ElementTree.Element | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in node if node is not None else ():
        key, value = pair.find(f"{CONNECT}Key"), pair.find(f"{CONNECT}Value")
        if key is None or value is None:
            raise bad_request("A filter property needs a Key and a Value.")
        values[_text(key)] = _typed_value(value)
    return values


def _filter(node: ElementTree.Element | None) -> Filter:
    if node is None:
        return TrueFilter()
    kind = node.get(INSTANCE_TYPE, "").split(":")[-1]
    if kind == "TrueFilter":
        return TrueFilter()
    if kind == "FalseFilter":
        return FalseFilter()
    if kind == "SqlFilter":
        expression = node.find(f"{CONNECT}SqlExpression")
        if expression is None or not _text(expression):
            raise bad_request("A SqlFilter needs a SqlExpression.")
        return SqlFilter.parse(_text(expression), _key_values(node.find(f"{CONNECT}Parameters")))
    if kind == "CorrelationFilter":
        names = {
            "CorrelationId": "correlation_id",
            "MessageId": "message_id",
            "To": "to",
            "ReplyTo": "reply_to",
            "Label": "label",
            "SessionId": "session_id",
            "ReplyToSessionId": "reply_to_session_id",
            "ContentType": "content_type",
        }
        fields = {names[_local(child.tag)]: _text(child) for child in node if _local(child.tag) in names}
        return CorrelationFilter(properties=_key_values(node.find(f"{CONNECT}Properties")), **fields)
    raise bad_request(f"The filter type '{kind}' is not known.")


def _action(node: ElementTree.Element | None) -> SqlRuleAction | None:
    if node is None or node.get(INSTANCE_TYPE, "").split(":")[-1] == "EmptyRuleAction":
        return None
    expression = node.find(f"{CONNECT}SqlExpression")
    if node.get(INSTANCE_TYPE, "").split(":")[-1] != "SqlRuleAction" or expression is None:
        raise bad_request("An action must be an EmptyRuleAction or a SqlRuleAction with a SqlExpression.")
    if node.find(f"{CONNECT}Parameters") is not None and len(node.find(f"{CONNECT}Parameters") or ()):
        raise bad_request("Action parameters are not supported by the emulator.")
    return SqlRuleAction.parse(_text(expression))


def rule(node: ElementTree.Element, name: str) -> Rule:
    """A RuleDescription (or a subscription's DefaultRuleDescription) as a rule named ``name``."""
    try:
        return Rule(name, _filter(node.find(f"{CONNECT}Filter")), _action(node.find(f"{CONNECT}Action")))
    except FilterError as exc:
        raise bad_request(f"The rule '{name}' is invalid: {exc}.") from None


def default_rule(node: ElementTree.Element) -> Rule:
    """The rule a new subscription starts with: its DefaultRuleDescription, else $Default (1=1)."""
    found = node.find(f"{CONNECT}DefaultRuleDescription")
    if found is None:
        return Rule("$Default", TrueFilter())
    named = found.find(f"{CONNECT}Name")
    return rule(found, _text(named) if named is not None and _text(named) else "$Default")
