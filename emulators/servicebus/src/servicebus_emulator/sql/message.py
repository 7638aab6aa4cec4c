"""The message view that filters and actions read and write, and the system property names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

# Lower-case key in FilterMessage.system -> name as Service Bus spells it (for error messages).
SYSTEM_PROPERTIES: Final[Mapping[str, str]] = {
    "messageid": "MessageId",
    "correlationid": "CorrelationId",
    "to": "To",
    "replyto": "ReplyTo",
    "label": "Label",
    "sessionid": "SessionId",
    "replytosessionid": "ReplyToSessionId",
    "contenttype": "ContentType",
    "deliverycount": "DeliveryCount",
    "enqueuedtimeutc": "EnqueuedTimeUtc",
    "sequencenumber": "SequenceNumber",
    "scheduledenqueuetimeutc": "ScheduledEnqueueTimeUtc",
    "expiresatutc": "ExpiresAtUtc",
    "timetolive": "TimeToLive",
    "size": "Size",
}

# The text properties a sender sets; the broker-assigned ones (sequence number, delivery count,
# enqueued time, size...) cannot be changed by a rule action.
SETTABLE_SYSTEM_PROPERTIES: Final[frozenset[str]] = frozenset(
    {"messageid", "correlationid", "to", "replyto", "label", "sessionid", "replytosessionid", "contenttype"}
)


@dataclass
class FilterMessage:
    """What a rule sees of a message: system properties by lower-case name, application properties."""

    system: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> FilterMessage:
        """A copy whose dictionaries can be changed without touching this message."""
        return FilterMessage(system=dict(self.system), properties=dict(self.properties))


def find_user_property_key(properties: Mapping[Any, Any], name: str) -> Any | None:
    """The key under which `name` is stored, or None when absent.

    Service Bus property names are case-insensitive; an exact match wins over a case-folded one so
    that two keys differing only in case stay distinguishable.
    """
    if name in properties:
        return name
    folded = name.casefold()
    for key in properties:
        if isinstance(key, str) and key.casefold() == folded:
            return key
    return None
