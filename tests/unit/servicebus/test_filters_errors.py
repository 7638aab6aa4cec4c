"""Parse errors name the position and the reason; no input makes the parser or evaluator crash."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servicebus_emulator.filters import FilterError, FilterMessage, SqlFilter, SqlRuleAction


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("", "empty filter expression"),
        ("priority", "at position 1 ('priority'): expected a condition"),
        ("priority = ", "at end of expression: expected a value"),
        ("priority = 'high", "at position 12: unterminated string"),
        ("[my prop = 1", "at position 1: unterminated identifier"),
        ("[] = 1", "at position 1 ('[]'): empty identifier"),
        ("a = 1 AND", "at end of expression: expected a value"),
        ("a = 1 b = 2", "at position 7 ('b'): expected AND, OR or end of expression"),
        ("(a = 1", "at end of expression: expected ')' to close the '(' at position 1"),
        ("a = 1)", "at position 6 (')'): expected AND, OR or end of expression"),
        ("a == 1", "at position 4 ('='): expected a value"),
        ("a IN ()", "at position 7 (')'): expected a value"),
        ("a IN 1", "at position 6 ('1'): expected '(' to open the IN list"),
        ("a NOT = 1", "at position 7 ('='): expected IN or LIKE after NOT"),
        ("a IS 1", "at position 6 ('1'): expected NULL after IS"),
        ("1 IS NULL", "at position 1 ('1'): IS [NOT] NULL applies to a property name"),
        ("a LIKE 5", "at position 8 ('5'): LIKE needs a string pattern"),
        (
            "a LIKE 'x' ESCAPE 'ab'",
            "at position 19 (\"'ab'\"): ESCAPE needs a string of exactly one character",
        ),
        ("a LIKE 'x!' ESCAPE '!'", "LIKE pattern ends with its escape character"),
        ("in = 1", "at position 1 ('in'): IN is a reserved word; write [in]"),
        ("sys.Foo = 1", "at position 5 ('Foo'): unknown system property"),
        ("system.Label = 1", "at position 1 ('system'): unknown scope"),
        ("foo(1) = 1", "at position 1 ('foo'): unknown function"),
        ("a = @p", "at position 5 ('@p'): the parameter has no value"),
        ("a = 1 # comment", "at position 7 ('#'): unexpected character"),
        ("a = 99999999999999999999", "outside the Int64 range"),
        ("(a = 1) + 1 = 2", "at position 1 ('('): expected a value, but this is a condition"),
        ("EXISTS(a) = TRUE", "expected a value, but this is a condition"),
        ("a = 1 AND b", "at position 11 ('b'): expected a condition"),
        ("NOT a", "at position 5 ('a'): expected a condition"),
        ("a = 'x' " + "x" * 1100, "Service Bus allows at most 1024"),
    ],
)
def test_parse_errors_say_where_and_why(expression: str, expected: str) -> None:
    """Each malformed filter raises FilterError naming the position or token and the reason."""
    with pytest.raises(FilterError) as raised:
        SqlFilter.parse(expression)
    assert expected in str(raised.value)


def test_deep_parenthesis_nesting_is_a_filter_error() -> None:
    """Hundreds of nested parentheses give FilterError, not RecursionError."""
    with pytest.raises(FilterError, match="nests parentheses, NOT or signs more than 32 deep"):
        SqlFilter.parse("(" * 400 + "a = 1" + ")" * 400)


def test_deep_not_and_sign_nesting_is_a_filter_error() -> None:
    """Long runs of NOT or unary minus give FilterError, not RecursionError."""
    with pytest.raises(FilterError, match="more than 32 deep"):
        SqlFilter.parse("NOT " * 200 + "a = 1")
    with pytest.raises(FilterError, match="more than 32 deep"):
        SqlFilter.parse("a = " + "-" * 500 + "1")


def test_long_left_leaning_chain_is_a_filter_error() -> None:
    """A chain too deep to evaluate recursively (a+a+...+a) is refused at parse time."""
    with pytest.raises(FilterError, match="nests more than 128 levels"):
        SqlFilter.parse("+".join(["a"] * 300) + " = 1")


def test_long_or_chain_is_accepted_and_evaluates() -> None:
    """A filter of ~100 ORed comparisons within 1024 characters is fine."""
    expression = " OR ".join(f"n = {i}" for i in range(100))
    assert len(expression) <= 1024
    assert SqlFilter.parse(expression).matches(FilterMessage(properties={"n": 99}))


def test_moderate_nesting_is_accepted() -> None:
    """Thirty nested parentheses stay within the limit."""
    assert SqlFilter.parse("(" * 30 + "a = 1" + ")" * 30).matches(FilterMessage(properties={"a": 1}))


# -- property-based ----------------------------------------------------------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=8),
    st.datetimes(timezones=st.just(datetime.UTC)),
    st.timedeltas(),
    st.uuids(),
    st.binary(max_size=4),
    st.decimals(),
)
_NAMES = ("a", "b", "c")
_MESSAGES = st.builds(
    FilterMessage,
    system=st.fixed_dictionaries({}, optional={"label": _VALUES, "deliverycount": _VALUES, "to": _VALUES}),
    properties=st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=3),
)
_TOKENS = st.sampled_from(
    [
        "a", "b", "[c]", "sys.Label", "sys.DeliveryCount", "user.a", "1", "2.5", "1E3", "'x'", "'%'", "TRUE",
        "NULL", "=", "<>", "<", ">=", "+", "-", "*", "/", "%", "(", ")", ",", "AND", "OR", "NOT", "IN",
        "LIKE", "ESCAPE", "'!'", "IS", "EXISTS", "newid()", "p(", "SET", "REMOVE", ";", "0",
    ]
)  # fmt: skip


def _check_never_crashes(expression: str, message: FilterMessage) -> None:
    try:
        sql_filter = SqlFilter.parse(expression)
    except FilterError:
        pass
    else:
        assert sql_filter.matches(message) in (True, False)
    try:
        action = SqlRuleAction.parse(expression)
    except FilterError:
        pass
    else:
        assert isinstance(action.apply(message), FilterMessage)


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=200), _MESSAGES)
def test_arbitrary_text_only_ever_raises_filter_error(expression: str, message: FilterMessage) -> None:
    """Any text either parses (and then evaluates to a bool) or raises FilterError, nothing else."""
    _check_never_crashes(expression, message)


@settings(deadline=None, max_examples=500)
@given(st.lists(_TOKENS, max_size=30).map(" ".join), _MESSAGES)
def test_token_soup_only_ever_raises_filter_error(expression: str, message: FilterMessage) -> None:
    """Random sequences of SQL tokens parse and evaluate, or raise FilterError; nothing crashes."""
    _check_never_crashes(expression, message)


def _value_expressions() -> st.SearchStrategy[str]:
    leaves = st.sampled_from(
        ["a", "b", "c", "sys.Label", "sys.DeliveryCount", "1", "0", "-3", "2.5", "'x'", "''", "TRUE", "NULL"]
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from("+-*/%"), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda v: f"-{v}"),
        ),
        max_leaves=6,
    )


def _conditions() -> st.SearchStrategy[str]:
    values = _value_expressions()
    comparisons = st.tuples(values, st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]), values).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"
    )
    predicates = st.one_of(
        comparisons,
        st.tuples(values, st.lists(values, min_size=1, max_size=3)).map(
            lambda t: f"{t[0]} IN ({', '.join(t[1])})"
        ),
        st.tuples(values, st.sampled_from(["'%'", "'x%'", "'_'", "b"])).map(lambda t: f"{t[0]} LIKE {t[1]}"),
        st.sampled_from(["a IS NULL", "b IS NOT NULL", "EXISTS(c)", "1=1", "1=0"]),
    )
    return st.recursive(
        predicates,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            inner.map(lambda c: f"NOT ({c})"),
        ),
        max_leaves=6,
    )


@settings(deadline=None, max_examples=300)
@given(_conditions(), _MESSAGES)
def test_valid_filters_evaluate_without_error_and_not_is_consistent(condition: str, message: Any) -> None:
    """Grammatical filters always parse; a condition and its NOT never both match."""
    positive = SqlFilter.parse(condition).matches(message)
    negative = SqlFilter.parse(f"NOT ({condition})").matches(message)
    assert not (positive and negative)
