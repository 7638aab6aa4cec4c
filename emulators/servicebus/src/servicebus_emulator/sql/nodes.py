"""Syntax tree of filters and actions; each node evaluates itself against a FilterMessage.

Value nodes return a Python value or None (unknown); condition nodes return True, False or None.
Every node records its depth so the parser can refuse trees too deep to evaluate recursively.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from servicebus_emulator.sql import values
from servicebus_emulator.sql.message import SYSTEM_PROPERTIES, FilterMessage, find_user_property_key
from servicebus_emulator.sql.values import Truth


@dataclass(frozen=True)
class Node:
    depth: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", 1 + max((child.depth for child in self.children()), default=0))

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True)
class ValueNode(Node):
    def evaluate(self, message: FilterMessage) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class ConditionNode(Node):
    def evaluate(self, message: FilterMessage) -> Truth:
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(ValueNode):
    value: Any

    def evaluate(self, message: FilterMessage) -> Any:
        return self.value


@dataclass(frozen=True)
class NewId(ValueNode):
    """newid(): a fresh GUID per evaluation."""

    def evaluate(self, message: FilterMessage) -> Any:
        return uuid.uuid4()


@dataclass(frozen=True)
class SystemProperty(ValueNode):
    key: str  # lower-case key of FilterMessage.system

    def evaluate(self, message: FilterMessage) -> Any:
        return message.system.get(self.key)

    def exists(self, message: FilterMessage) -> bool:
        return message.system.get(self.key) is not None


@dataclass(frozen=True)
class UserProperty(ValueNode):
    name: str

    def evaluate(self, message: FilterMessage) -> Any:
        key = find_user_property_key(message.properties, self.name)
        return None if key is None else message.properties[key]

    def exists(self, message: FilterMessage) -> bool:
        return find_user_property_key(message.properties, self.name) is not None


PropertyNode = SystemProperty | UserProperty


@dataclass(frozen=True)
class PropertyFunction(ValueNode):
    """property(name) / p(name): the property whose name an expression computes."""

    name: ValueNode

    def children(self) -> tuple[Node, ...]:
        return (self.name,)

    def evaluate(self, message: FilterMessage) -> Any:
        name = self.name.evaluate(message)
        if not isinstance(name, str):
            return None
        scope, _, rest = name.partition(".")
        if scope.casefold() == "sys" and rest.casefold() in SYSTEM_PROPERTIES:
            return message.system.get(rest.casefold())
        if scope.casefold() == "user" and rest:
            name = rest
        return UserProperty(name).evaluate(message)


@dataclass(frozen=True)
class Unary(ValueNode):
    symbol: str  # "+" or "-"
    operand: ValueNode

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)

    def evaluate(self, message: FilterMessage) -> Any:
        value = self.operand.evaluate(message)
        return values.negate(value) if self.symbol == "-" else values.identity(value)


@dataclass(frozen=True)
class Arithmetic(ValueNode):
    symbol: str
    left: ValueNode
    right: ValueNode

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def evaluate(self, message: FilterMessage) -> Any:
        return values.arithmetic(self.symbol, self.left.evaluate(message), self.right.evaluate(message))


@dataclass(frozen=True)
class Comparison(ConditionNode):
    symbol: str
    left: ValueNode
    right: ValueNode

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def evaluate(self, message: FilterMessage) -> Truth:
        return values.compare(self.symbol, self.left.evaluate(message), self.right.evaluate(message))


@dataclass(frozen=True)
class InList(ConditionNode):
    operand: ValueNode
    items: tuple[ValueNode, ...]
    negated: bool

    def children(self) -> tuple[Node, ...]:
        return (self.operand, *self.items)

    def evaluate(self, message: FilterMessage) -> Truth:
        value = self.operand.evaluate(message)
        if value is None:
            return None  # only an unknown left operand makes IN unknown (service docs)
        found = any(values.equals(value, item.evaluate(message)) for item in self.items)
        return found != self.negated


@dataclass(frozen=True)
class Like(ConditionNode):
    operand: ValueNode
    pattern: ValueNode
    escape: ValueNode | None
    negated: bool

    def children(self) -> tuple[Node, ...]:
        return (self.operand, self.pattern) + ((self.escape,) if self.escape else ())

    def evaluate(self, message: FilterMessage) -> Truth:
        escape = None if self.escape is None else self.escape.evaluate(message)
        if self.escape is not None and escape is None:
            return None
        matched = values.like(self.operand.evaluate(message), self.pattern.evaluate(message), escape)
        return None if matched is None else matched != self.negated


@dataclass(frozen=True)
class IsNull(ConditionNode):
    """IS [NOT] NULL: a missing property and a null value are both NULL; never unknown."""

    operand: PropertyNode
    negated: bool

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)

    def evaluate(self, message: FilterMessage) -> Truth:
        return (self.operand.evaluate(message) is None) != self.negated


@dataclass(frozen=True)
class Exists(ConditionNode):
    operand: PropertyNode

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)

    def evaluate(self, message: FilterMessage) -> Truth:
        return self.operand.exists(message)


@dataclass(frozen=True)
class Not(ConditionNode):
    operand: ConditionNode

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)

    def evaluate(self, message: FilterMessage) -> Truth:
        result = self.operand.evaluate(message)
        return None if result is None else not result


@dataclass(frozen=True)
class And(ConditionNode):
    operands: tuple[ConditionNode, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands

    def evaluate(self, message: FilterMessage) -> Truth:
        unknown = False
        for operand in self.operands:
            result = operand.evaluate(message)
            if result is False:
                return False
            unknown = unknown or result is None
        return None if unknown else True


@dataclass(frozen=True)
class Or(ConditionNode):
    operands: tuple[ConditionNode, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands

    def evaluate(self, message: FilterMessage) -> Truth:
        unknown = False
        for operand in self.operands:
            result = operand.evaluate(message)
            if result is True:
                return True
            unknown = unknown or result is None
        return None if unknown else False


@dataclass(frozen=True)
class SetStatement:
    """SET target = value; system text properties take the value's text form, as .NET prints it."""

    target: PropertyNode
    value: ValueNode

    def apply(self, message: FilterMessage) -> None:
        value = self.value.evaluate(message)
        if isinstance(self.target, SystemProperty):
            message.system[self.target.key] = _as_text(value)
            return
        key = find_user_property_key(message.properties, self.target.name)
        message.properties[self.target.name if key is None else key] = value


@dataclass(frozen=True)
class RemoveStatement:
    """REMOVE target: drops a user property, or clears a settable system property."""

    target: PropertyNode

    def apply(self, message: FilterMessage) -> None:
        if isinstance(self.target, SystemProperty):
            message.system[self.target.key] = None
            return
        key = find_user_property_key(message.properties, self.target.name)
        if key is not None:
            del message.properties[key]


Statement = SetStatement | RemoveStatement


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return str(value)
