"""docs/configuration.md's settings table is scripts/settings_table.py's output from
claimcheck.settings.SETTINGS: one source for every name and default, so the table cannot drift from
what the app reads."""

from __future__ import annotations

import pytest
from claimcheck.settings import SETTINGS

from scripts import settings_table


def test_the_readme_table_is_the_generated_one() -> None:
    """Run `python -m scripts.settings_table` after changing SETTINGS or a meaning there."""
    readme = settings_table.README.read_text(encoding="utf-8")
    assert settings_table.rewritten(readme) == readme


def test_every_setting_of_the_table_has_its_row_and_default() -> None:
    table = settings_table.render()
    for row in SETTINGS:
        assert f"`{row.name}`" in table
        assert f"`{row.format(row.default())}`" in table


def test_a_setting_without_a_row_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = tuple(row for row in settings_table.ROWS if "CLAIMCHECK_VISIBILITY_POLLS" not in row.names)
    monkeypatch.setattr(settings_table, "ROWS", rows)
    with pytest.raises(SystemExit, match="CLAIMCHECK_VISIBILITY_POLLS"):
        settings_table.render()
