"""Recursive-descent parser for Service Bus SQL filters and rule actions.

One precedence ladder parses both conditions and values (a parenthesis may hold either), and
each operator checks the kind of its operands, so `(a + 1) > 2` and `(a > 1) AND b = 2` need no
backtracking. Bounds on nesting and tree depth turn pathological text into a FilterError long
before Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from servicebus_emulator.sql import nodes, values
from servicebus_emulator.sql.errors import FilterError
from servicebus_emulator.sql.lexer import Token, TokenKind, tokenize
from servicebus_emulator.sql.message import SETTABLE_SYSTEM_PROPERTIES, SYSTEM_PROPERTIES

MAX_NESTING: Final = 32  # parentheses, NOT and unary signs inside one another
MAX_TREE_DEPTH: Final = 128  # also bounds left-leaning chains such as a+b+c+...
MAX_ACTION_STATEMENTS: Final = 32  # Service Bus quota: expressions per rule action

_COMPARISON_SYMBOLS: Final = frozenset({"=", "<>", "!=", ">", ">=", "<", "<="})
_CONDITION_HINT: Final = "a condition (comparison, IN, LIKE, IS NULL or EXISTS)"

NodeT = TypeVar("NodeT", bound=nodes.Node)


def parse_filter(text: str, parameters: Mapping[str, object] | None = None) -> nodes.ConditionNode:
    """The condition tree of a SQL filter expression; FilterError if Service Bus would refuse it."""
    parser = _Parser(text, parameters)
    if parser.current.kind is TokenKind.END:
        raise FilterError("empty filter expression")
    start = parser.current
    condition = parser.condition(parser.disjunction(), start)
    parser.expect_end("AND, OR")
    return condition


def parse_action(text: str) -> tuple[nodes.Statement, ...]:
    """The statements of a SQL rule action (SET/REMOVE, optionally separated by ';')."""
    parser = _Parser(text)
    statements: list[nodes.Statement] = []
    while parser.current.kind is not TokenKind.END:
        statements.append(parser.statement())
        while parser.accept_operator(";"):
            pass
    if not statements:
        raise FilterError("empty action: expected SET or REMOVE statements")
    if len(statements) > MAX_ACTION_STATEMENTS:
        raise FilterError(
            f"action has {len(statements)} statements; Service Bus allows at most {MAX_ACTION_STATEMENTS}"
        )
    return tuple(statements)


class _Parser:
    def __init__(self, text: str, parameters: Mapping[str, object] | None = None) -> None:
        self._tokens = tokenize(text, parameters)
        self._index = 0
        self._nesting = 0

    @property
    def current(self) -> Token:
        return self._tokens[self._index]

    # -- token helpers -------------------------------------------------------------------------

    def advance(self) -> Token:
        token = self.current
        if token.kind is not TokenKind.END:
            self._index += 1
        return token

    def accept_operator(self, symbol: str) -> bool:
        if self.current.kind is TokenKind.OPERATOR and self.current.text == symbol:
            self._index += 1
            return True
        return False

    def accept_keyword(self, keyword: str) -> bool:
        if self.current.keyword == keyword:
            self._index += 1
            return True
        return False

    def expect_operator(self, symbol: str, purpose: str) -> None:
        if not self.accept_operator(symbol):
            raise self.error(f"expected {symbol!r} {purpose}")

    def expect_end(self, alternatives: str) -> None:
        if self.current.kind is not TokenKind.END:
            raise self.error(f"expected {alternatives} or end of expression")

    def error(self, message: str, token: Token | None = None) -> FilterError:
        return FilterError(f"at {(token or self.current).describe()}: {message}")

    def build(self, node: NodeT) -> NodeT:
        if node.depth > MAX_TREE_DEPTH:
            raise FilterError(f"expression nests more than {MAX_TREE_DEPTH} levels deep; simplify it")
        return node

    def enter_nesting(self) -> None:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise self.error(f"expression nests parentheses, NOT or signs more than {MAX_NESTING} deep")

    # -- kind checks ---------------------------------------------------------------------------

    def condition(self, node: nodes.Node, start: Token) -> nodes.ConditionNode:
        if not isinstance(node, nodes.ConditionNode):
            raise self.error(f"expected {_CONDITION_HINT}, but this is a bare value", start)
        return node

    def value(self, node: nodes.Node, start: Token) -> nodes.ValueNode:
        if not isinstance(node, nodes.ValueNode):
            raise self.error("expected a value, but this is a condition", start)
        return node

    # -- conditions ----------------------------------------------------------------------------

    def disjunction(self) -> nodes.Node:
        start = self.current
        first = self.conjunction()
        if self.current.keyword != "OR":
            return first
        operands = [self.condition(first, start)]
        while self.accept_keyword("OR"):
            start = self.current
            operands.append(self.condition(self.conjunction(), start))
        return self.build(nodes.Or(tuple(operands)))

    def conjunction(self) -> nodes.Node:
        start = self.current
        first = self.negation()
        if self.current.keyword != "AND":
            return first
        operands = [self.condition(first, start)]
        while self.accept_keyword("AND"):
            start = self.current
            operands.append(self.condition(self.negation(), start))
        return self.build(nodes.And(tuple(operands)))

    def negation(self) -> nodes.Node:
        if not self.accept_keyword("NOT"):
            return self.predicate()
        self.enter_nesting()
        start = self.current
        operand = self.condition(self.negation(), start)
        self._nesting -= 1
        return self.build(nodes.Not(operand))

    def predicate(self) -> nodes.Node:
        start = self.current
        left = self.additive()
        token = self.current
        if token.kind is TokenKind.OPERATOR and token.text in _COMPARISON_SYMBOLS:
            self.advance()
            right_start = self.current
            right = self.value(self.additive(), right_start)
            return self.build(nodes.Comparison(token.text, self.value(left, start), right))
        if token.keyword == "IS":
            self.advance()
            negated = self.accept_keyword("NOT")
            if not self.accept_keyword("NULL"):
                raise self.error("expected NULL after IS" + (" NOT" if negated else ""))
            if not isinstance(left, nodes.SystemProperty | nodes.UserProperty):
                raise self.error("IS [NOT] NULL applies to a property name, not to this expression", start)
            return self.build(nodes.IsNull(left, negated))
        negated = token.keyword == "NOT"
        if negated:
            self.advance()
        if self.accept_keyword("IN"):
            return self.in_list(self.value(left, start), negated)
        if self.accept_keyword("LIKE"):
            return self.like(self.value(left, start), negated)
        if negated:
            raise self.error("expected IN or LIKE after NOT")
        return left

    def in_list(self, operand: nodes.ValueNode, negated: bool) -> nodes.ConditionNode:
        self.expect_operator("(", "to open the IN list")
        items: list[nodes.ValueNode] = []
        while True:
            start = self.current
            items.append(self.value(self.additive(), start))
            if not self.accept_operator(","):
                break
        self.expect_operator(")", "to close the IN list")
        return self.build(nodes.InList(operand, tuple(items), negated))

    def like(self, operand: nodes.ValueNode, negated: bool) -> nodes.ConditionNode:
        pattern_start = self.current
        pattern = self.value(self.additive(), pattern_start)
        escape: nodes.ValueNode | None = None
        escape_start = self.current
        if self.accept_keyword("ESCAPE"):
            escape_start = self.current
            escape = self.value(self.additive(), escape_start)
        self.check_constant_like(pattern, pattern_start, escape, escape_start)
        return self.build(nodes.Like(operand, pattern, escape, negated))

    def check_constant_like(
        self,
        pattern: nodes.ValueNode,
        pattern_start: Token,
        escape: nodes.ValueNode | None,
        escape_start: Token,
    ) -> None:
        """Refuse at parse time what can only ever evaluate to unknown."""
        escape_char: str | None = None
        if isinstance(escape, nodes.Constant):
            if not (isinstance(escape.value, str) and len(escape.value) == 1):
                raise self.error("ESCAPE needs a string of exactly one character", escape_start)
            escape_char = escape.value
        if isinstance(pattern, nodes.Constant):
            if not isinstance(pattern.value, str):
                raise self.error("LIKE needs a string pattern", pattern_start)
            if escape_char is not None and values.compile_like(pattern.value, escape_char) is None:
                raise self.error("LIKE pattern ends with its escape character", pattern_start)

    # -- values --------------------------------------------------------------------------------

    def additive(self) -> nodes.Node:
        return self.binary_chain(("+", "-"), self.multiplicative)

    def multiplicative(self) -> nodes.Node:
        return self.binary_chain(("*", "/", "%"), self.unary)

    def binary_chain(self, symbols: tuple[str, ...], operand: Callable[[], nodes.Node]) -> nodes.Node:
        start = self.current
        left = operand()
        while self.current.kind is TokenKind.OPERATOR and self.current.text in symbols:
            symbol = self.advance().text
            right_start = self.current
            right = self.value(operand(), right_start)
            left = self.build(nodes.Arithmetic(symbol, self.value(left, start), right))
        return left

    def unary(self) -> nodes.Node:
        token = self.current
        if not (token.kind is TokenKind.OPERATOR and token.text in ("+", "-")):
            return self.primary()
        self.advance()
        self.enter_nesting()
        start = self.current
        operand = self.value(self.unary(), start)
        self._nesting -= 1
        return self.build(nodes.Unary(token.text, operand))

    def primary(self) -> nodes.Node:
        token = self.current
        if token.kind in (TokenKind.NUMBER, TokenKind.STRING, TokenKind.PARAMETER):
            self.advance()
            return nodes.Constant(token.value)
        if token.keyword in ("TRUE", "FALSE", "NULL"):
            self.advance()
            return nodes.Constant({"TRUE": True, "FALSE": False, "NULL": None}[token.keyword])
        if token.keyword == "EXISTS":
            self.advance()
            self.expect_operator("(", "after EXISTS")
            target = self.property_reference()
            self.expect_operator(")", "to close EXISTS(")
            return self.build(nodes.Exists(target))
        if self.accept_operator("("):
            self.enter_nesting()
            inner = self.disjunction()
            self.expect_operator(")", f"to close the '(' at position {token.position + 1}")
            self._nesting -= 1
            return inner
        if token.kind is TokenKind.WORD and token.keyword is None and self.peek_is_call():
            return self.function_call()
        if token.kind in (TokenKind.WORD, TokenKind.DELIMITED):
            return self.property_reference()
        raise self.error("expected a value, property or '('")

    def peek_is_call(self) -> bool:
        following = self._tokens[self._index + 1]
        return following.kind is TokenKind.OPERATOR and following.text == "("

    def function_call(self) -> nodes.ValueNode:
        name = self.advance()
        self.advance()  # the '('
        function = name.text.lower()
        if function == "newid":
            self.expect_operator(")", "newid() takes no arguments")
            return nodes.NewId()
        if function in ("property", "p"):
            start = self.current
            argument = self.value(self.additive(), start)
            self.expect_operator(")", f"to close {name.text}(")
            return self.build(nodes.PropertyFunction(argument))
        raise self.error("unknown function (known: newid(), property(name), p(name))", name)

    def property_reference(self) -> nodes.SystemProperty | nodes.UserProperty:
        first = self.property_name_part()
        if not self.accept_operator("."):
            return nodes.UserProperty(str(first.value))
        scope = str(first.value).lower()
        name = self.property_name_part(after_scope=True)
        if scope == "user":
            return nodes.UserProperty(str(name.value))
        if scope != "sys":
            raise self.error("unknown scope (use sys. or user.; bracket names containing dots)", first)
        key = str(name.value).lower()
        if key not in SYSTEM_PROPERTIES:
            known = ", ".join(f"sys.{spelled}" for spelled in SYSTEM_PROPERTIES.values())
            raise self.error(f"unknown system property (known: {known})", name)
        return nodes.SystemProperty(key)

    def property_name_part(self, after_scope: bool = False) -> Token:
        token = self.current
        if token.kind is TokenKind.DELIMITED or (
            token.kind is TokenKind.WORD and (after_scope or token.keyword is None)
        ):
            return self.advance()
        if token.keyword is not None:
            raise self.error(f"{token.keyword} is a reserved word; write [{token.text}] for a property")
        raise self.error("expected a property name")

    # -- actions -------------------------------------------------------------------------------

    def statement(self) -> nodes.Statement:
        verb = self.current
        command = verb.text.upper() if verb.kind is TokenKind.WORD else ""
        if command not in ("SET", "REMOVE"):
            raise self.error("expected SET or REMOVE")
        self.advance()
        target_start = self.current
        target = self.property_reference()
        if isinstance(target, nodes.SystemProperty) and target.key not in SETTABLE_SYSTEM_PROPERTIES:
            settable = ", ".join(f"sys.{SYSTEM_PROPERTIES[k]}" for k in sorted(SETTABLE_SYSTEM_PROPERTIES))
            raise self.error(
                f"this system property cannot be changed by an action (settable: {settable})", target_start
            )
        if command == "REMOVE":
            return nodes.RemoveStatement(target)
        self.expect_operator("=", "after the SET target")
        start = self.current
        return nodes.SetStatement(target, self.value(self.disjunction(), start))
