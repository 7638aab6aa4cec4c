"""Rule actions, correlation filters, rules and Config.json rule entries."""

from __future__ import annotations

from typing import Any

import pytest
from servicebus_emulator.filters import (
    CorrelationFilter,
    FalseFilter,
    FilterError,
    FilterMessage,
    Rule,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
    rule_from_config,
)


def message(properties: dict[str, Any] | None = None, **system: Any) -> FilterMessage:
    return FilterMessage(system=system, properties=properties or {})


# -- actions -------------------------------------------------------------------------------------


def test_set_creates_and_updates_user_properties() -> None:
    """SET adds a new property and overwrites an existing one."""
    result = SqlRuleAction.parse("SET importance = 'critical'; SET quantity = quantity / 2").apply(
        message({"quantity": 10})
    )
    assert result.properties == {"quantity": 5, "importance": "critical"}


def test_apply_returns_a_copy_and_leaves_the_original_alone() -> None:
    """The input message is not modified."""
    original = message({"a": 1}, label="before")
    result = SqlRuleAction.parse("SET a = 2; SET sys.Label = 'after'").apply(original)
    assert (original.properties, original.system) == ({"a": 1}, {"label": "before"})
    assert (result.properties, result.system) == ({"a": 2}, {"label": "after"})


def test_set_sys_label_and_other_settable_system_properties() -> None:
    """SET sys.Label / sys.CorrelationId / sys.To change the system properties."""
    action = SqlRuleAction.parse("SET sys.Label = 'urgent'; SET sys.CorrelationId = 'low'; SET sys.To = 'x'")
    assert action.apply(message()).system == {"label": "urgent", "correlationid": "low", "to": "x"}


def test_set_system_text_property_converts_values_to_text() -> None:
    """A non-string value set on a text system property takes .NET's text form."""
    result = SqlRuleAction.parse("SET sys.Label = n + 1; SET sys.ContentType = flag").apply(
        message({"n": 41, "flag": True})
    )
    assert result.system == {"label": "42", "contenttype": "True"}


def test_remove_drops_user_property_case_insensitively() -> None:
    """REMOVE deletes the property whatever the case of its name, and ignores a missing one."""
    result = SqlRuleAction.parse("REMOVE Priority; REMOVE missing").apply(
        message({"priority": "x", "keep": 1})
    )
    assert result.properties == {"keep": 1}


def test_set_keeps_the_existing_key_spelling() -> None:
    """SET Quantity updates the existing 'quantity' key rather than adding a second one."""
    result = SqlRuleAction.parse("SET Quantity = 1").apply(message({"quantity": 5}))
    assert result.properties == {"quantity": 1}


def test_statements_run_in_order_and_see_earlier_changes() -> None:
    """A later statement reads what an earlier one set; semicolons are optional."""
    result = SqlRuleAction.parse("SET a = 1 SET b = a + 1; REMOVE a;").apply(message())
    assert result.properties == {"b": 2}


def test_set_from_unknown_stores_null() -> None:
    """SET x = missing + 1 stores a null value rather than failing."""
    assert SqlRuleAction.parse("SET x = missing + 1").apply(message()).properties == {"x": None}


def test_remove_sys_property_clears_it() -> None:
    """REMOVE sys.Label clears the label."""
    assert SqlRuleAction.parse("REMOVE sys.Label").apply(message(label="x")).system == {"label": None}


@pytest.mark.parametrize(
    "target", ["sys.SequenceNumber", "sys.DeliveryCount", "sys.EnqueuedTimeUtc", "sys.Size"]
)
def test_broker_assigned_system_properties_cannot_be_set(target: str) -> None:
    """Broker-assigned system properties are read-only in actions."""
    with pytest.raises(FilterError, match="cannot be changed by an action"):
        SqlRuleAction.parse(f"SET {target} = 1")


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "empty action"),
        ("SET", "expected a property name"),
        ("SET a 1", "expected '='"),
        ("SET a = ", "expected a value"),
        ("DELETE a", "expected SET or REMOVE"),
        ("SET a = 1 = 2", "expected a value, but this is a condition"),
        ("SET a = 1 b", "expected SET or REMOVE"),
        ("SET a = b > 1", "expected a value, but this is a condition"),
        ("SET sys.Nope = 1", "unknown system property"),
        ("; ".join(["SET a = 1"] * 33), "at most 32"),
    ],
)
def test_invalid_actions_raise_filter_error(expression: str, reason: str) -> None:
    """Malformed actions fail at parse time with a reason."""
    with pytest.raises(FilterError, match=reason):
        SqlRuleAction.parse(expression)


# -- correlation filters ---------------------------------------------------------------------------


def test_correlation_filter_matches_all_given_fields() -> None:
    """Every set system field and listed property must be equal."""
    correlation = CorrelationFilter(
        label="Important", reply_to="john@contoso.com", properties={"color": "Red"}
    )
    assert correlation.matches(message({"color": "Red"}, label="Important", replyto="john@contoso.com"))
    assert not correlation.matches(message({"color": "Blue"}, label="Important", replyto="john@contoso.com"))
    assert not correlation.matches(message({"color": "Red"}, label="Other", replyto="john@contoso.com"))
    assert not correlation.matches(message({"color": "Red"}, label="Important"))


def test_correlation_filter_string_compare_is_exact() -> None:
    """System and property strings compare case-sensitively."""
    assert not CorrelationFilter(correlation_id="Contoso").matches(message(correlationid="contoso"))
    assert not CorrelationFilter(properties={"color": "Red"}).matches(message({"color": "red"}))


def test_correlation_filter_ignores_unset_fields() -> None:
    """Fields left as None do not constrain the message."""
    assert CorrelationFilter(session_id="s1").matches(message({"any": 1}, sessionid="s1", label="x"))


def test_correlation_filter_property_types_follow_sql_equality() -> None:
    """5 matches 5.0 but not '5' or TRUE; a missing property never matches."""
    assert CorrelationFilter(properties={"n": 5}).matches(message({"n": 5.0}))
    assert not CorrelationFilter(properties={"n": 5}).matches(message({"n": "5"}))
    assert not CorrelationFilter(properties={"n": 1}).matches(message({"n": True}))
    assert not CorrelationFilter(properties={"n": 1}).matches(message())


def test_correlation_filter_property_names_are_case_insensitive() -> None:
    """Property names match regardless of case, as in SQL filters."""
    assert CorrelationFilter(properties={"Document_Type": "contract"}).matches(
        message({"document_type": "contract"})
    )


def test_correlation_filter_from_config_treats_empty_strings_as_unset() -> None:
    """The Config.json object maps its keys; "" means the field is not part of the filter."""
    config = {
        "ContentType": "", "CorrelationId": "", "Label": "", "MessageId": "", "ReplyTo": "",
        "ReplyToSessionId": "", "SessionId": "", "To": "", "Properties": {"document_type": "contract"},
    }  # fmt: skip
    correlation = CorrelationFilter.from_config(config)
    assert correlation == CorrelationFilter(properties={"document_type": "contract"})
    assert correlation.matches(message({"document_type": "contract"}, label="anything"))


def test_correlation_filter_from_config_maps_every_system_field() -> None:
    """Each Config.json key lands on its system property."""
    config = {
        "ContentType": "ct", "CorrelationId": "ci", "Label": "lb", "MessageId": "mi", "ReplyTo": "rt",
        "ReplyToSessionId": "rs", "SessionId": "si", "To": "to",
    }  # fmt: skip
    system = {
        "contenttype": "ct", "correlationid": "ci", "label": "lb", "messageid": "mi", "replyto": "rt",
        "replytosessionid": "rs", "sessionid": "si", "to": "to",
    }  # fmt: skip
    correlation = CorrelationFilter.from_config(config)
    assert correlation.matches(FilterMessage(system=system))
    for key in system:
        assert not correlation.matches(FilterMessage(system={**system, key: "other"}))


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"Label": "", "Properties": {}}, "at least one"),
        ({"Lable": "x"}, "unknown correlation filter key"),
        ({"Label": 5}, "Label must be a string"),
        ({"Properties": ["a"]}, "Properties must be an object"),
        ({"Properties": {"a": None}}, "property 'a' needs a string"),
        ({"Properties": {"a": {"b": 1}}}, "property 'a' needs a string"),
    ],
)
def test_correlation_filter_from_config_rejects_bad_input(config: dict[str, Any], reason: str) -> None:
    """Bad correlation filter objects raise FilterError saying what is wrong."""
    with pytest.raises(FilterError, match=reason):
        CorrelationFilter.from_config(config)


# -- rules -----------------------------------------------------------------------------------


def test_true_and_false_filters() -> None:
    """TrueFilter matches everything, FalseFilter nothing."""
    assert TrueFilter().matches(message())
    assert not FalseFilter().matches(message())


def test_rule_without_action_returns_an_unchanged_copy() -> None:
    """A matching rule without action gives an equal but separate message."""
    original = message({"a": 1})
    result = Rule("all", TrueFilter()).evaluate(original)
    assert result == original
    assert result is not original
    assert result.properties is not original.properties


def test_rule_with_action_returns_the_actioned_copy_or_none() -> None:
    """A matching rule applies its action; a non-matching one returns None."""
    rule = Rule("high", SqlFilter.parse("priority = 'high'"), SqlRuleAction.parse("SET sys.Label = 'urgent'"))
    result = rule.evaluate(message({"priority": "high"}))
    assert result is not None
    assert result.system["label"] == "urgent"
    assert rule.evaluate(message({"priority": "low"})) is None


def test_rule_from_config_sql_with_action() -> None:
    """A Sql rule entry with an Action becomes a SqlFilter plus SqlRuleAction."""
    rule = rule_from_config(
        {
            "Name": "high-priority",
            "Properties": {
                "FilterType": "Sql",
                "SqlFilter": {"SqlExpression": "priority = 'high'"},
                "Action": {"SqlExpression": "SET sys.Label = 'urgent'"},
            },
        }
    )
    assert rule.name == "high-priority"
    assert rule.filter == SqlFilter.parse("priority = 'high'")
    assert rule.action == SqlRuleAction.parse("SET sys.Label = 'urgent'")


def test_rule_from_config_correlation_without_action() -> None:
    """A Correlation rule entry becomes a CorrelationFilter; an empty Action means none."""
    rule = rule_from_config(
        {
            "Name": "contracts",
            "Properties": {
                "FilterType": "Correlation",
                "CorrelationFilter": {"Label": "", "Properties": {"document_type": "contract"}},
                "Action": {"SqlExpression": ""},
            },
        }
    )
    assert rule == Rule("contracts", CorrelationFilter(properties={"document_type": "contract"}))


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"Properties": {}}, 'needs a non-empty "Name"'),
        ({"Name": "r"}, "rule 'r': missing \"Properties\""),
        ({"Name": "r", "Properties": {"FilterType": "Boolean"}}, "rule 'r': unknown FilterType 'Boolean'"),
        ({"Name": "r", "Properties": {}}, "rule 'r': unknown FilterType None"),
        ({"Name": "r", "Properties": {"FilterType": "Sql"}}, "rule 'r': FilterType \"Sql\" needs"),
        ({"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": ""}}}, "needs"),
        ({"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": "a = 1"}}, "must be an object"),
        ({"Name": "r", "Properties": {"FilterType": "Correlation"}}, 'needs a "CorrelationFilter"'),
        (
            {"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = "}}},
            "rule 'r': SQL filter 'a = ': at end of expression: expected a value",
        ),
        (
            {
                "Name": "r",
                "Properties": {
                    "FilterType": "Sql",
                    "SqlFilter": {"SqlExpression": "1=1"},
                    "Action": {"SqlExpression": "SET sys.Size = 1"},
                },
            },
            "rule 'r': action 'SET sys.Size = 1': at position 5",
        ),
    ],
)
def test_rule_from_config_rejects_bad_entries_naming_the_rule(entry: dict[str, Any], reason: str) -> None:
    """Bad rule entries raise FilterError naming the rule and the problem."""
    with pytest.raises(FilterError) as raised:
        rule_from_config(entry)
    assert reason in str(raised.value)
