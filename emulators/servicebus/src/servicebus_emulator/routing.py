"""Between AMQP messages and the rule engine (interface B): build the FilterMessage a rule reads,
and write a rule action's changes back into the subscription's copy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from servicebus_emulator.amqp_types import Timestamp
from servicebus_emulator.filters import FilterMessage, Rule
from servicebus_emulator.message import AmqpMessage

# FilterMessage.system key -> AMQP properties field, for the properties a sender (or an action) sets.
_SETTABLE = {
    "messageid": "message_id",
    "correlationid": "correlation_id",
    "to": "to",
    "replyto": "reply_to",
    "label": "subject",
    "sessionid": "group_id",
    "replytosessionid": "reply_to_group_id",
    "contenttype": "content_type",
}


def _plain(value: Any) -> Any:
    """AMQP wrapper values as the plain Python values the rule engine compares."""
    if isinstance(value, Timestamp):
        return value.to_datetime()
    if isinstance(value, bool | None):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def filter_view(message: AmqpMessage, *, sequence_number: int, enqueued_ms: int, size: int) -> FilterMessage:
    """What a subscription rule sees of ``message``."""
    system: dict[str, Any] = {
        key: _plain(message.properties[field])
        for key, field in _SETTABLE.items()
        if message.properties.get(field) is not None
    }
    system.update(
        deliverycount=0,
        sequencenumber=sequence_number,
        size=size,
        enqueuedtimeutc=Timestamp(enqueued_ms).to_datetime(),
    )
    if message.ttl_ms:
        system["timetolive"] = timedelta(milliseconds=message.ttl_ms)
    properties = {str(key): _plain(value) for key, value in message.application_properties.items()}
    return FilterMessage(system=system, properties=properties)


def apply_rules(rules: tuple[Rule, ...], message: AmqpMessage, view: FilterMessage) -> AmqpMessage | None:
    """The subscription's copy of ``message``, or None when no rule matches.

    One copy per subscription, with the action of the first matching rule applied (interface B).
    """
    for rule in rules:
        result = rule.evaluate(view)
        if result is None:
            continue
        copy = message.copy()
        if rule.action is not None:
            for key, field in _SETTABLE.items():
                if result.system.get(key) != view.system.get(key):
                    copy.properties[field] = result.system.get(key)
            if result.properties != view.properties:
                copy.application_properties = dict(result.properties)
            copy.changed()
        return copy
    return None
