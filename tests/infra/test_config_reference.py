"""docs/deploy.md's config table is generated from the typed stack settings and cannot drift."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from infra import config_reference
from infra.stack_config import StackConfigError, StackSettings, load_settings


def _keys_load_settings_reads() -> set[str]:
    """The keys load_settings reads, from its own refusal of an unknown key (which lists them)."""
    with pytest.raises(StackConfigError) as raised:
        load_settings({"noSuchKey": 1}, "dev")
    found = re.search(r"known keys: (\[.*\])", str(raised.value))
    assert found is not None
    return set(ast.literal_eval(found.group(1)))


def test_every_key_read_is_described_and_nothing_else() -> None:
    """The reference lists exactly the keys load_settings reads, each once."""
    names = [key.name for key in config_reference.KEYS]
    assert len(names) == len(set(names))
    assert set(names) == _keys_load_settings_reads()


def test_defaults_come_from_the_settings() -> None:
    """A key without a derived default names a StackSettings field, so its shown default is the value
    load_settings gives an empty config (e.g. serviceBusSku -> Standard)."""
    fields = {field.name for field in dataclasses.fields(StackSettings)}
    settings = load_settings({}, config_reference.EXAMPLE_STACK)
    for key in config_reference.KEYS:
        assert (key.attribute is None) != (key.derived_default is None), key.name
        if key.attribute is not None:
            assert key.attribute in fields, key.name
    by_name = {key.name: key for key in config_reference.KEYS}
    assert config_reference.default_text(by_name["serviceBusSku"], settings) == "`Standard`"
    assert config_reference.default_text(by_name["logRetentionDays"], settings) == "`30`"
    assert config_reference.default_text(by_name["alertEmails"], settings) == "`[]`"


def test_docs_table_is_the_generated_one() -> None:
    """docs/deploy.md holds exactly render()'s table (`python -m infra.config_reference` rewrites it)."""
    text = config_reference.DOC.read_text(encoding="utf-8")
    assert config_reference.with_table(text) == text
    assert config_reference.render() in text


def test_a_stale_table_is_detected() -> None:
    """A document whose table lacks a key differs from its regenerated form."""
    text = config_reference.DOC.read_text(encoding="utf-8")
    stale = "\n".join(line for line in text.splitlines() if not line.startswith("| `topology`"))
    assert config_reference.with_table(stale) != stale
