"""Subscription rules of the embedded Service Bus emulator: filters, actions and Config.json rules.

Semantics follow Microsoft's "Subscription Rule SQL Filter syntax" and "SQL Rule Action syntax":
three-valued logic (a missing property is unknown; a rule matches only when its condition is TRUE),
C#-style type rules (long/double promotion, ordinal strings, mismatched types give unknown rather
than an error), case-insensitive keywords and property names. Invalid text raises FilterError when
parsed, so the emulator refuses a bad Config.json at start-up; evaluation itself never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from servicebus_emulator.sql import nodes, values
from servicebus_emulator.sql.errors import FilterError
from servicebus_emulator.sql.message import FilterMessage
from servicebus_emulator.sql.parser import parse_action, parse_filter

__all__ = [
    "CorrelationFilter",
    "FalseFilter",
    "Filter",
    "FilterError",
    "FilterMessage",
    "Rule",
    "SqlFilter",
    "SqlRuleAction",
    "TrueFilter",
    "rule_from_config",
]

# (Config.json "CorrelationFilter" key, CorrelationFilter attribute, FilterMessage.system key)
_CORRELATION_FIELDS: Final = (
    ("ContentType", "content_type", "contenttype"),
    ("CorrelationId", "correlation_id", "correlationid"),
    ("Label", "label", "label"),
    ("MessageId", "message_id", "messageid"),
    ("ReplyTo", "reply_to", "replyto"),
    ("ReplyToSessionId", "reply_to_session_id", "replytosessionid"),
    ("SessionId", "session_id", "sessionid"),
    ("To", "to", "to"),
)


class Filter(Protocol):
    def matches(self, message: FilterMessage) -> bool: ...


@dataclass(frozen=True)
class TrueFilter:
    """Matches every message (the `$Default` rule, SQL `1=1`)."""

    def matches(self, message: FilterMessage) -> bool:
        return True


@dataclass(frozen=True)
class FalseFilter:
    """Matches no message (SQL `1=0`)."""

    def matches(self, message: FilterMessage) -> bool:
        return False


@dataclass(frozen=True)
class SqlFilter:
    """A SQL filter expression; build it with `SqlFilter.parse`."""

    expression: str
    condition: nodes.ConditionNode = field(repr=False, compare=False)
    parameters: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def parse(cls, expression: str, parameters: Mapping[str, Any] | None = None) -> SqlFilter:
        """Parse `expression` with the values of its ``@name`` parameters; FilterError says where and
        why it is not valid Service Bus SQL."""
        return cls(expression, parse_filter(expression, parameters), dict(parameters or {}))

    def matches(self, message: FilterMessage) -> bool:
        return self.condition.evaluate(message) is True


@dataclass(frozen=True)
class CorrelationFilter:
    """Equality on system properties and application properties; every given field must match.

    Strings compare exactly (ordinal, case-sensitive); application property values compare with
    the SQL `=` rules, so 5 matches 5.0 but never '5' or TRUE. Property names are case-insensitive.
    """

    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    label: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))  # the caller's dict may change
        if not self.properties and all(value is None for value in self._system_fields().values()):
            raise FilterError("a correlation filter needs at least one system or application property")
        for name, value in self.properties.items():
            if value is None or isinstance(value, Mapping | list | tuple | set):
                raise FilterError(f"correlation filter property {name!r} needs a string, number or boolean")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CorrelationFilter:
        """Map a Config.json "CorrelationFilter" object; an empty string means "not set"."""
        known = [config_key for config_key, _, _ in _CORRELATION_FIELDS] + ["Properties"]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise FilterError(
                f"unknown correlation filter key(s) {', '.join(unknown)} (known: {', '.join(known)})"
            )
        fields: dict[str, str | None] = {}
        for config_key, attribute, _ in _CORRELATION_FIELDS:
            value = config.get(config_key)
            if value is not None and not isinstance(value, str):
                raise FilterError(
                    f"correlation filter {config_key} must be a string, not {type(value).__name__}"
                )
            fields[attribute] = value or None
        properties = config.get("Properties") or {}
        if not isinstance(properties, Mapping):
            raise FilterError("correlation filter Properties must be an object of name: value")
        return cls(**fields, properties=properties)

    def matches(self, message: FilterMessage) -> bool:
        for key, expected in self._system_fields().items():
            if expected is not None and message.system.get(key) != expected:
                return False
        return all(
            values.equals(nodes.UserProperty(name).evaluate(message), expected)
            for name, expected in self.properties.items()
        )

    def _system_fields(self) -> dict[str, str | None]:
        """FilterMessage.system key -> expected value (None: not part of the filter)."""
        return {system_key: getattr(self, attribute) for _, attribute, system_key in _CORRELATION_FIELDS}


@dataclass(frozen=True)
class SqlRuleAction:
    """SET/REMOVE statements applied to a matching message's copy; build it with `parse`."""

    expression: str
    statements: tuple[nodes.Statement, ...] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, expression: str) -> SqlRuleAction:
        """Parse `expression`; FilterError says where and why it is not a valid action."""
        return cls(expression, parse_action(expression))

    def apply(self, message: FilterMessage) -> FilterMessage:
        """A modified copy of `message`; statements run in order, each seeing the previous ones."""
        result = message.copy()
        for statement in self.statements:
            statement.apply(result)
        return result


@dataclass(frozen=True)
class Rule:
    name: str
    filter: Filter
    action: SqlRuleAction | None = None

    def evaluate(self, message: FilterMessage) -> FilterMessage | None:
        """None when the filter does not match, else the message's copy with the action applied."""
        if not self.filter.matches(message):
            return None
        return message.copy() if self.action is None else self.action.apply(message)


def rule_from_config(rule_json: Mapping[str, Any]) -> Rule:
    """Turn one Config.json subscription "Rules" entry into a Rule; FilterError names the rule."""
    name = rule_json.get("Name") if isinstance(rule_json, Mapping) else None
    if not isinstance(name, str) or not name:
        raise FilterError(f'a subscription rule needs a non-empty "Name", got {name!r}')
    try:
        properties = rule_json.get("Properties")
        if not isinstance(properties, Mapping):
            raise FilterError('missing "Properties" object')
        return Rule(name, _filter_from_config(properties), _action_from_config(properties.get("Action")))
    except FilterError as error:
        raise FilterError(f"rule {name!r}: {error}") from error


def _filter_from_config(properties: Mapping[str, Any]) -> Filter:
    filter_type = properties.get("FilterType")
    kind = filter_type.lower() if isinstance(filter_type, str) else None
    if kind == "sql":
        expression = _sql_expression(properties.get("SqlFilter"), "SqlFilter")
        if expression is None:
            raise FilterError('FilterType "Sql" needs "SqlFilter": {"SqlExpression": "..."}')
        try:
            return SqlFilter.parse(expression)
        except FilterError as error:
            raise FilterError(f"SQL filter {expression!r}: {error}") from error
    if kind == "correlation":
        correlation = properties.get("CorrelationFilter")
        if not isinstance(correlation, Mapping):
            raise FilterError('FilterType "Correlation" needs a "CorrelationFilter" object')
        return CorrelationFilter.from_config(correlation)
    raise FilterError(f'unknown FilterType {filter_type!r} (expected "Sql" or "Correlation")')


def _action_from_config(action: Any) -> SqlRuleAction | None:
    if action is None:
        return None
    expression = _sql_expression(action, "Action")
    if expression is None:
        return None
    try:
        return SqlRuleAction.parse(expression)
    except FilterError as error:
        raise FilterError(f"action {expression!r}: {error}") from error


def _sql_expression(section: Any, section_name: str) -> str | None:
    """The "SqlExpression" of a section; None when absent or empty (Config.json's "not set")."""
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise FilterError(f'"{section_name}" must be an object with "SqlExpression"')
    expression = section.get("SqlExpression")
    if expression is not None and not isinstance(expression, str):
        raise FilterError(f'"{section_name}.SqlExpression" must be a string')
    return expression or None
