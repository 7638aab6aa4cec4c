"""What a sentence says: obligation, parties, dates, deadlines, review and urgency markers.

Small pure functions over one collapsed sentence; English and Portuguese (the seeds are Brazilian).
The word patterns are written in lower case and matched against `sentence.lower()`: Python's
re.IGNORECASE makes long alternations about three times slower, and every sentence of a large
document goes through them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

_OBLIGATION = re.compile(
    r"\b(?:shall|must|will|agrees?\s+to|(?:is|are)\s+required\s+to|undertakes?\s+to"
    r"|deve|devem|deverá|deverão|obriga-se|obrigam-se|se\s+obrigam?|compromete-se)\b",
)
_REVIEW = re.compile(
    r"\b(?:terminat(?:e|es|ed|ion)|penalt(?:y|ies)|liquidated\s+damages|indemnif(?:y|ies|ication)"
    r"|indemnity|liabilit(?:y|ies)|rescis(?:ão|ao)|rescindir|multas?|penalidades?"
    r"|indeniza(?:ção|cao|r)|responsabilidade\s+ilimitada|limitação\s+de\s+responsabilidade)\b",
)
_URGENCY = re.compile(r"\b(?:urgent|urgently|urgente|urgência|urgencia)\b")
_CONTRACT_TITLE = re.compile(r"\b(?:agreement|contract|contrato)\b")

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan", "janeiro"),
            ("february", "feb", "fevereiro"),
            ("march", "mar", "março", "marco"),
            ("april", "apr", "abril"),
            ("may", "maio"),
            ("june", "jun", "junho"),
            ("july", "jul", "julho"),
            ("august", "aug", "agosto"),
            ("september", "sep", "sept", "setembro"),
            ("october", "oct", "outubro"),
            ("november", "nov", "novembro"),
            ("december", "dec", "dezembro"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE = re.compile(
    r"\b(?:(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})"  # 2026-12-31
    r"|(?P<num_d>\d{1,2})/(?P<num_m>\d{1,2})/(?P<num_y>\d{4})"  # 31/12/2026 (day first, as in Brazil)
    rf"|(?P<mdy_m>{_MONTH_NAMES})\.?\s+(?P<mdy_d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<mdy_y>\d{{4}})"
    # 31 December 2026, 31st of December 2026, 1º de fevereiro de 2026
    rf"|(?P<dmy_d>\d{{1,2}})(?:st|nd|rd|th|º|°)?\s+(?:of\s+|de\s+)?(?P<dmy_m>{_MONTH_NAMES})\.?"
    r",?\s+(?:de\s+)?(?P<dmy_y>\d{4}))(?!\d)",
)
# Every supported date format has a four-digit year; most sentences have none, and this check
# is far cheaper than the full date pattern.
_YEAR = re.compile(r"\d{4}")
_RELATIVE_DEADLINE = re.compile(
    r"\b(?:within|no\s+later\s+than|em\s+até|no\s+prazo\s+(?:máximo\s+)?de|dentro\s+de)\s+"
    r"\d+(?:\s+\([^)]{1,30}\))?\s+(?:business\s+|calendar\s+|working\s+)?"
    r"(?:days?|weeks?|months?|dias?|semanas?|meses|mês)(?:\s+(?:úteis|corridos))?",
)


def is_obligation(sentence: str) -> bool:
    return _OBLIGATION.search(sentence.lower()) is not None


def needs_review(sentence: str) -> bool:
    """Termination, penalty, indemnity and liability clauses deserve a human look."""
    return _REVIEW.search(sentence.lower()) is not None


def is_urgent(sentence: str) -> bool:
    return _URGENCY.search(sentence.lower()) is not None


def is_contract_title(sentence: str) -> bool:
    return _CONTRACT_TITLE.search(sentence.lower()) is not None


def find_dates(sentence: str) -> list[str]:
    """Calendar dates in the sentence as ISO strings, in order; impossible dates are skipped."""
    found: list[str] = []
    if not _YEAR.search(sentence):
        return found
    for match in _DATE.finditer(sentence.lower()):
        parts = match.groupdict()
        if parts["iso_y"]:
            year, month, day = parts["iso_y"], parts["iso_m"], parts["iso_d"]
        elif parts["num_y"]:
            year, month, day = parts["num_y"], parts["num_m"], parts["num_d"]
        elif parts["mdy_y"]:
            year, month, day = parts["mdy_y"], str(_MONTHS[parts["mdy_m"]]), parts["mdy_d"]
        else:
            year, month, day = parts["dmy_y"], str(_MONTHS[parts["dmy_m"]]), parts["dmy_d"]
        try:
            found.append(date(int(year), int(month), int(day)).isoformat())
        except ValueError:
            continue
    return found


def find_due_date(sentence: str) -> str | None:
    """The first calendar date, else the first relative deadline kept as (lower-case) text, else None."""
    dates = find_dates(sentence)
    if dates:
        return dates[0]
    deadline = _RELATIVE_DEADLINE.search(sentence.lower())
    return deadline.group(0) if deadline else None


@dataclass(frozen=True)
class Party:
    name: str
    aliases: tuple[str, ...] = ()  # defined terms that stand for the party ("Supplier", "CONTRATADA")


# `Name ("Alias")`, `Name (the "Alias")`, `Name (hereinafter "Alias")`; curly quotes too.
_DEFINED_TERM = re.compile(r"""\(\s*(?:hereinafter\s+)?(?:the\s+)?["“]([^"”]{1,60})["”]\s*\)""")
_BETWEEN = re.compile(r"\b(?i:between)\s+(?=[A-ZÀ-Ý])(.+)")  # the first name is capitalised
_PARTIES_LINE = re.compile(r"^(?:parties|partes)\s*:\s*(.+)", re.IGNORECASE)
_ROLE_LINE = re.compile(r"^(CONTRATANTE|CONTRATADA|CONTRATADO)\s*:\s*(.+)", re.IGNORECASE)
# A name ends where a description starts: ", a company...", ", inscrita no CNPJ...", "; and".
_NAME_END = re.compile(r",\s+(?=[a-zà-ÿ])|;|\s+-\s+")
# Company suffixes written with a final period ("Acme Ltd."), which is part of the name rather
# than the end of the sentence.
_ABBREVIATED_SUFFIX = re.compile(r"\b(?:Ltd|Inc|Corp|Co|Ltda|S\.A|N\.V|B\.V)\.$")


def _clean_name(raw: str) -> str | None:
    name = _NAME_END.split(raw, maxsplit=1)[0]
    name = re.sub(r"^(?:and|e)\s+|^[,\s]+", "", name.strip())
    name = name.rstrip(" ,")
    if name.endswith(".") and not _ABBREVIATED_SUFFIX.search(name):
        name = name.rstrip(".")
    if not name or not name[0].isupper() or len(name) > 120:
        return None
    return name


def find_parties(sentence: str) -> list[Party]:
    """Parties declared by a preamble sentence, or an empty list."""
    role = _ROLE_LINE.match(sentence)
    if role:
        name = _clean_name(role.group(2))
        word = role.group(1).upper()
        return [Party(name, (word, word.capitalize()))] if name else []
    listed = _PARTIES_LINE.match(sentence)
    if listed:
        names = re.split(r";|\s+and\s+|\s+e\s+", listed.group(1))
        return [Party(name) for name in map(_clean_name, names) if name]
    between = _BETWEEN.search(sentence)
    if not between:
        return []
    clause = between.group(1)
    pieces = _DEFINED_TERM.split(clause)
    if len(pieces) > 1:
        # split() alternates [text, alias, text, alias, ..., tail]: each text ends with a name.
        parties = []
        for text, alias in zip(pieces[0::2], pieces[1::2], strict=False):
            name = _clean_name(text)
            if name:
                parties.append(Party(name, (alias.strip(),)))
        return parties
    first, _, second = clause.partition(" and ")
    return [Party(name) for name in (_clean_name(first), _clean_name(second)) if name]


class PartyIndex:
    """Known parties and the names or defined terms that refer to them (case-sensitive, as drafted)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._by_mention: dict[str, str] = {}
        self._mention: re.Pattern[str] | None = None

    def add(self, party: Party) -> None:
        if party.name not in self.names:
            self.names.append(party.name)
        for mention in (party.name, *party.aliases):
            self._by_mention.setdefault(mention, party.name)
        alternatives = sorted(self._by_mention, key=len, reverse=True)
        self._mention = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, alternatives)) + r")(?!\w)")

    def party_in(self, sentence: str) -> str | None:
        """The party mentioned first in the sentence: usually the subject who owes the obligation."""
        if self._mention is None:
            return None
        match = self._mention.search(sentence)
        return self._by_mention[match.group(0)] if match else None
