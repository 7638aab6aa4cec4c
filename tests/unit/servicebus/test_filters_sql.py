"""SQL filter semantics: type rules, NULL logic, LIKE, IN, EXISTS, arithmetic, sys properties."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from servicebus_emulator.filters import FilterMessage, SqlFilter


def matches(expression: str, properties: dict[str, Any] | None = None, **system: Any) -> bool:
    return SqlFilter.parse(expression).matches(FilterMessage(system=system, properties=properties or {}))


# -- type rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("n = 5", 5, True),
        ("n = 5.0", 5, True),
        ("n > 4.5", 5, True),
        ("n < 5.5", 5.0, True),
        ("n = 5", 5.5, False),
        ("n >= 5", 5, True),
        ("n <= 4", 5, False),
        ("n <> 4", 5, True),
        ("n != 5", 5, False),
    ],
)
def test_numbers_compare_across_long_and_double(expression: str, value: Any, expected: bool) -> None:
    """Integers and doubles compare by value after promotion to double."""
    assert matches(expression, {"n": value}) is expected


@pytest.mark.parametrize(
    "expression", ["n = '5'", "n <> '5'", "n > '4'", "s = 5", "s <> 5", "flag = 1", "n = TRUE"]
)
def test_mismatched_types_never_match_and_never_raise(expression: str) -> None:
    """Comparing a string, number and boolean with each other is unknown: no match, no exception."""
    assert matches(expression, {"n": 5, "s": "5", "flag": True}) is False


def test_mismatched_comparison_is_unknown_so_its_negation_is_not_true() -> None:
    """NOT of a type-mismatched comparison is still unknown, not TRUE."""
    assert matches("NOT (n = 'x')", {"n": 5}) is False


def test_strings_compare_ordinally_and_case_sensitively() -> None:
    """String equality is exact and ordering is ordinal (upper case sorts before lower case)."""
    assert matches("s = 'High'", {"s": "High"})
    assert not matches("s = 'high'", {"s": "High"})
    assert matches("s < 'a'", {"s": "Z"})
    assert matches("s > 'abc'", {"s": "abd"})


def test_string_order_uses_utf16_code_units() -> None:
    """Ordinal order is .NET's UTF-16 order: a non-BMP character sorts below U+FFFD."""
    assert matches("s < '\ufffd'", {"s": "\U0001f600"})


def test_boolean_property_compares_with_true_and_false() -> None:
    """A boolean application property works with = TRUE / = FALSE."""
    assert matches("review_required = TRUE", {"review_required": True})
    assert matches("review_required = FALSE", {"review_required": False})
    assert not matches("review_required = TRUE", {"review_required": False})


def test_booleans_have_no_ordering() -> None:
    """< on booleans is unknown, as C# defines no ordering for bool."""
    assert not matches("flag < TRUE", {"flag": False})
    assert not matches("NOT (flag < TRUE)", {"flag": False})


def test_constant_filters() -> None:
    """1=1 matches everything and 1=0 nothing."""
    assert matches("1=1")
    assert not matches("1=0")


def test_large_integer_constants_are_int64() -> None:
    """Integer constants keep Int64 precision."""
    assert matches("n = 9223372036854775807", {"n": 2**63 - 1})


def test_datetimes_compare_and_subtract_to_timespans() -> None:
    """Date-times compare with each other; their difference compares with a TimeSpan."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    later = now + datetime.timedelta(minutes=5)
    props = {"start": now, "end": later, "limit": datetime.timedelta(minutes=10)}
    assert matches("start < [end]", props)
    assert matches("[end] - start <= limit", props)
    assert not matches("start = 5", props)


def test_guid_properties_compare_for_equality_only() -> None:
    """GUIDs compare with = but have no ordering."""
    value = uuid.uuid4()
    assert matches("a = b", {"a": value, "b": value})
    assert not matches("a < b", {"a": value, "b": value})


# -- NULL and three-valued logic ---------------------------------------------------------------


def test_missing_property_is_unknown_in_comparisons() -> None:
    """A missing property makes = and <> unknown, so neither matches."""
    assert not matches("missing = 1")
    assert not matches("missing <> 1")


def test_comparison_with_null_constant_is_unknown() -> None:
    """x = NULL is unknown even when x is missing; only IS NULL is true."""
    assert not matches("x = NULL")
    assert not matches("x <> NULL", {"x": 1})
    assert matches("x IS NULL")


def test_not_of_unknown_is_unknown() -> None:
    """NOT (missing = 1) does not match."""
    assert not matches("NOT (missing = 1)")
    assert not matches("NOT missing = 1")


def test_is_null_and_is_not_null() -> None:
    """IS NULL is true for a missing property or a null value; IS NOT NULL for a present value."""
    assert matches("x IS NULL")
    assert matches("x IS NULL", {"x": None})
    assert not matches("x IS NULL", {"x": 0})
    assert matches("x IS NOT NULL", {"x": ""})
    assert not matches("x IS NOT NULL")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("t = 1 AND u = 1", False),  # T AND U = U
        ("f = 1 AND u = 1", False),  # F AND U = F
        ("NOT (f = 1 AND u = 1)", True),  # NOT F = T proves F AND U is F, not U
        ("NOT (t = 1 AND u = 1)", False),  # NOT U = U
        ("t = 1 OR u = 1", True),  # T OR U = T
        ("f = 1 OR u = 1", False),  # F OR U = U
        ("NOT (f = 1 OR u = 1)", False),  # NOT U = U
        ("NOT (f = 1 OR f = 1)", True),
    ],
)
def test_and_or_follow_the_documented_truth_tables(expression: str, expected: bool) -> None:
    """AND/OR with unknown follow the Service Bus truth tables (t is true, f false, u unknown)."""
    assert matches(expression, {"t": 1, "f": 2}) is expected


def test_arithmetic_with_unknown_is_unknown() -> None:
    """missing + 1 is unknown, so neither = nor <> matches."""
    assert not matches("missing + 1 = 1")
    assert not matches("missing + 1 <> 1")
    assert not matches("-missing = 0")


# -- LIKE --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("'ABC%'", "ABCdef", True),
        ("'ABC%'", "ABC", True),
        ("'%bus%'", "service bus message", True),
        ("'A_C'", "ABC", True),
        ("'A_C'", "AC", False),
        ("'A_C'", "ABBC", False),
        ("'abc%'", "ABCdef", False),
        ("'a.c'", "abc", False),  # regex characters are literal
        ("'line%'", "line1\nline2", True),
    ],
)
def test_like_wildcards(pattern: str, value: str, expected: bool) -> None:
    """% matches any run, _ exactly one character, everything else literally and case-sensitively."""
    assert matches(f"s LIKE {pattern}", {"s": value}) is expected


def test_like_escape_makes_percent_literal() -> None:
    r"""LIKE 'ABC\%' ESCAPE '\' matches ABC% and not ABCdef."""
    assert matches("s LIKE 'ABC\\%' ESCAPE '\\'", {"s": "ABC%"})
    assert not matches("s LIKE 'ABC\\%' ESCAPE '\\'", {"s": "ABCdef"})


def test_like_escape_makes_underscore_and_escape_itself_literal() -> None:
    """An escaped _ is literal, and a doubled escape character stands for itself."""
    assert matches("s LIKE 'a!_b' ESCAPE '!'", {"s": "a_b"})
    assert not matches("s LIKE 'a!_b' ESCAPE '!'", {"s": "axb"})
    assert matches("s LIKE 'a!!b%' ESCAPE '!'", {"s": "a!bcd"})


def test_like_escape_can_be_a_wildcard_character() -> None:
    """With ESCAPE '%', '%%' is a literal percent sign."""
    assert matches("s LIKE '100%%' ESCAPE '%'", {"s": "100%"})
    assert not matches("s LIKE '100%%' ESCAPE '%'", {"s": "1000"})


def test_not_like() -> None:
    """NOT LIKE negates a known result and stays unknown for a missing operand."""
    assert matches("s NOT LIKE 'x%'", {"s": "abc"})
    assert not matches("s NOT LIKE 'a%'", {"s": "abc"})
    assert not matches("missing NOT LIKE 'a%'")


def test_like_on_non_string_is_unknown() -> None:
    """LIKE on a number is unknown rather than a string conversion."""
    assert not matches("n LIKE '5%'", {"n": 55})
    assert not matches("n NOT LIKE '5%'", {"n": 55})


def test_like_pattern_from_a_property() -> None:
    """The pattern may be any string expression, here another property."""
    assert matches("s LIKE p", {"s": "abc", "p": "a%"})
    assert not matches("s LIKE p", {"s": "abc", "p": 5})


# -- IN, EXISTS ------------------------------------------------------------------------------


def test_in_list() -> None:
    """IN matches when any item equals the operand; NOT IN when none does."""
    assert matches("s IN ('a', 'b', 'c')", {"s": "b"})
    assert not matches("s IN ('a', 'b')", {"s": "z"})
    assert matches("s NOT IN ('a', 'b')", {"s": "z"})
    assert matches("n IN (1, 2.5, 3)", {"n": 2.5})
    assert not matches("n IN ('1', TRUE)", {"n": 1})


def test_in_with_unknown_operand_is_unknown() -> None:
    """A missing left operand makes both IN and NOT IN unknown."""
    assert not matches("missing IN ('a')")
    assert not matches("missing NOT IN ('a')")


def test_exists() -> None:
    """EXISTS is true for a present property, even when its value is null."""
    assert matches("EXISTS(a)", {"a": None})
    assert not matches("EXISTS(a)")
    assert matches("NOT EXISTS(b)", {"a": 1})
    assert matches("EXISTS(sys.Label)", label="x")
    assert not matches("EXISTS(sys.Label)")


# -- arithmetic --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3 = 7", True),
        ("(1 + 2) * 3 = 9", True),
        ("10 - 4 - 3 = 3", True),
        ("2 * 3 % 4 = 2", True),
        ("-2 * 3 = -6", True),
        ("- (2 + 3) = -5", True),
        ("7 / 2 = 3", True),  # long division truncates
        ("-7 / 2 = -3", True),  # toward zero
        ("-7 % 3 = -1", True),  # remainder has the dividend's sign
        ("7 / 2.0 = 3.5", True),
        ("1.5E1 = 15", True),
        ("0.5E-2 = 0.005", True),
        ("'ab' + 'cd' = 'abcd'", True),
        ("+3 = 3", True),
    ],
)
def test_arithmetic_precedence_and_long_semantics(expression: str, expected: bool) -> None:
    """* / % bind tighter than + -, long division truncates toward zero, doubles promote."""
    assert matches(expression) is expected


def test_division_by_zero_is_unknown_for_longs_and_infinite_for_doubles() -> None:
    """n / 0 is unknown for longs (no crash) and infinity for doubles, as in .NET."""
    assert not matches("n / 0 = 0", {"n": 1})
    assert not matches("n / 0 <> 0", {"n": 1})
    assert matches("n / 0.0 > 1.0E300", {"n": 1})


def test_long_arithmetic_wraps_like_int64() -> None:
    """Int64 overflow wraps around as unchecked C# arithmetic does."""
    assert matches("9223372036854775807 + 1 < 0")


def test_arithmetic_on_property_values() -> None:
    """Arithmetic reads property values, mixing longs and doubles."""
    assert matches("quantity * price > 100", {"quantity": 3, "price": 40.5})


def test_string_plus_number_is_unknown() -> None:
    """Adding a number to a string is not defined: unknown."""
    assert not matches("s + 1 = 's1'", {"s": "s"})


# -- properties --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "system"),
    [
        ("sys.Label = 'urgent'", {"label": "urgent"}),
        ("sys.CorrelationId = 'c-1'", {"correlationid": "c-1"}),
        ("sys.MessageId = 'm-1'", {"messageid": "m-1"}),
        ("sys.To = 'dest'", {"to": "dest"}),
        ("sys.ReplyTo = 'back'", {"replyto": "back"}),
        ("sys.SessionId = 'wi-1'", {"sessionid": "wi-1"}),
        ("sys.ReplyToSessionId = 'rs'", {"replytosessionid": "rs"}),
        ("sys.ContentType = 'application/json'", {"contenttype": "application/json"}),
        ("sys.DeliveryCount >= 2", {"deliverycount": 2}),
        ("sys.SequenceNumber = 42", {"sequencenumber": 42}),
        ("sys.Size < 1024", {"size": 300}),
        (
            "sys.EnqueuedTimeUtc < sys.ExpiresAtUtc",
            {
                "enqueuedtimeutc": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
                "expiresatutc": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
            },
        ),
        ("sys.ScheduledEnqueueTimeUtc IS NULL", {}),
        ("sys.TimeToLive = sys.TimeToLive", {"timetolive": datetime.timedelta(hours=1)}),
    ],
)
def test_system_properties(expression: str, system: dict[str, Any]) -> None:
    """Each documented sys.* property reads its lower-case key of FilterMessage.system."""
    assert matches(expression, **system)


def test_sys_names_and_keywords_are_case_insensitive() -> None:
    """SYS.label, sys.LABEL, and/like/in/is null in any case all work."""
    assert matches("SYS.label = 'x' and s like 'a%' Or 1=0", {"s": "abc"}, label="x")
    assert matches("sys.LABEL in ('x') AND missing is NULL AND NoT s Not Like 'b%'", {"s": "bcd"}, label="x")


def test_user_scope_and_bare_names_read_application_properties() -> None:
    """user.prop and prop both read the application property, whose name is case-insensitive."""
    assert matches("user.priority = 'high' AND priority = 'high'", {"priority": "high"})
    assert matches("PRIORITY = 'high'", {"priority": "high"})
    assert matches("priority = 'low'", {"priority": "low", "Priority": "high"})


def test_sys_name_in_user_scope_is_an_application_property() -> None:
    """A bare Label is the application property Label, not the system Label."""
    assert not matches("Label = 'x'", label="x")
    assert matches("Label = 'x'", {"Label": "x"})


def test_bracketed_and_quoted_identifiers() -> None:
    """[my prop], [a]]b] and "Contoso & Northwind" name properties with any characters."""
    props = {"my prop": 1, "a]b": 2, "Contoso & Northwind": 3, "in": 4, "HR-EmployeeID": 5}
    assert matches('[my prop] = 1 AND [a]]b] = 2 AND "Contoso & Northwind" = 3', props)
    assert matches("[in] = 4 AND user.[HR-EmployeeID] = 5", props)


def test_string_constants_escape_quotes_by_doubling() -> None:
    """'O''Brien' is the string O'Brien."""
    assert matches("name = 'O''Brien'", {"name": "O'Brien"})


def test_property_function_reads_a_computed_name() -> None:
    """property(name) and p(name) read the property whose name an expression builds."""
    assert matches("property('col' + 'or') = 'red'", {"color": "red"})
    assert matches("p('sys.Label') = 'x'", label="x")
    assert not matches("p(5) = 1", {"5": 1})


def test_newid_is_a_guid_that_equals_no_string() -> None:
    """newid() yields a fresh GUID: never equal to a string, never IS NULL."""
    assert not matches("newid() = 'x'")
    assert matches("newid() <> newid()")


def test_parameters_bind_their_values_as_constants() -> None:
    """The management API's SqlFilter carries ``@name`` values (as in Microsoft's mgmt_rule sample):
    each stands for its constant, strings and numbers alike; names are case-insensitive."""
    parametrized = SqlFilter.parse(
        "property1 = @param1 AND property2 = @Param2", {"@param1": "value", "@param2": 1}
    )
    assert parametrized.matches(FilterMessage(properties={"property1": "value", "property2": 1}))
    assert not parametrized.matches(FilterMessage(properties={"property1": "value", "property2": 2}))
    assert not parametrized.matches(FilterMessage(properties={"property1": "@param1", "property2": 1}))
