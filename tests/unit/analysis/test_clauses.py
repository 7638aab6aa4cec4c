"""Sentence-level rules: dates, deadlines, obligations, parties, review and urgency markers."""

from __future__ import annotations

import pytest
from claimcheck.analysis.clauses import (
    Party,
    PartyIndex,
    find_dates,
    find_due_date,
    find_parties,
    is_obligation,
    is_urgent,
    needs_review,
)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Deliver by 2026-12-31.", ["2026-12-31"]),
        ("Pague até 31/12/2026.", ["2026-12-31"]),
        ("Pay by December 31, 2026.", ["2026-12-31"]),
        ("Pay by Dec. 31 2026.", ["2026-12-31"]),
        ("Signed on 31 December 2026.", ["2026-12-31"]),
        ("Signed on the 1st of March, 2027.", ["2027-03-01"]),
        ("Vigora de 1º de fevereiro de 2026 a 31 de janeiro de 2027.", ["2026-02-01", "2027-01-31"]),
        ("Entrega em 15 de Março de 2026.", ["2026-03-15"]),
    ],
)
def test_dates_in_common_formats_become_iso(sentence: str, expected: list[str]) -> None:
    """ISO, day-first numeric, English and Portuguese month names all give ISO dates in order."""
    assert find_dates(sentence) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "Due on 2026-02-30.",
        "Due on 31/13/2026.",
        "CNPJ 12.345.678/0001-90 and order 20261231.",
        "Maybe 12, 2026 is not a date.",
        "Within 30 days.",
    ],
)
def test_impossible_or_partial_dates_are_ignored(sentence: str) -> None:
    """Invalid calendar dates, registry numbers and date-less text yield no date."""
    assert find_dates(sentence) == []


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("The Buyer shall pay within 45 days of delivery.", "within 45 days"),
        ("Replace units within 10 business days.", "within 10 business days"),
        ("Within 2 Weeks of notice, the Supplier shall act.", "within 2 weeks"),
        ("A CONTRATANTE deverá pagar em até 10 dias.", "em até 10 dias"),
        ("Corrigir no prazo de 2 (dois) dias úteis.", "no prazo de 2 (dois) dias úteis"),
        ("Pay within 30 days, and in any case by 2026-06-30.", "2026-06-30"),
        ("The Supplier shall keep records.", None),
    ],
)
def test_due_date_prefers_a_calendar_date_then_a_relative_deadline(
    sentence: str, expected: str | None
) -> None:
    """A calendar date wins; otherwise the relative deadline is kept as lower-case text."""
    assert find_due_date(sentence) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "The Supplier shall deliver the goods.",
        "The Buyer MUST pay.",
        "The Provider will send a report.",
        "The Customer agrees to pay the fee.",
        "The Provider is required to delete the data.",
        "Each party undertakes to keep the terms confidential.",
        "A CONTRATADA deve enviar o relatório.",
        "A CONTRATADA deverá implantar a plataforma.",
        "As partes deverão assinar o aditivo.",
        "A CONTRATANTE obriga-se a pagar.",
        "A CONTRATADA se obriga a manter sigilo.",
    ],
)
def test_modal_verbs_mark_obligations(sentence: str) -> None:
    """English and Portuguese obligation verbs are recognised in any case."""
    assert is_obligation(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "Either party may terminate this Agreement.",
        "Qualquer das partes poderá rescindir este contrato.",
        "Prices are fixed for the term.",
        "The shallow pool is closed.",
        "O devedor paga juros.",
    ],
)
def test_permissions_and_statements_are_not_obligations(sentence: str) -> None:
    """May/poderá, plain statements and words that merely contain a modal are not obligations."""
    assert not is_obligation(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "Either party may terminate this Agreement.",
        "The Provider shall pay a penalty of 1%.",
        "The Supplier shall indemnify the Buyer.",
        "4. Limitation of Liability",
        "Liability under this Agreement is unlimited.",
        "Multa de 2% por semana de atraso.",
        "Qualquer das partes poderá rescindir este contrato.",
        "A CONTRATADA assume responsabilidade ilimitada.",
    ],
)
def test_termination_penalty_indemnity_and_liability_need_review(sentence: str) -> None:
    """Clauses a lawyer should read set review_required."""
    assert needs_review(sentence)


def test_ordinary_clauses_do_not_need_review() -> None:
    """A delivery obligation without risk words does not ask for review."""
    assert not needs_review("The Supplier shall deliver 5,000 units by 2026-05-15.")


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [("URGENT: replace the cards.", True), ("Pedido urgente de revisão.", True), ("Urgency is low.", False)],
)
def test_urgency_is_read_from_the_words(sentence: str, expected: bool) -> None:
    """URGENT / urgente make a document urgent; related words do not."""
    assert is_urgent(sentence) is expected


def test_between_preamble_with_defined_terms_gives_names_and_aliases() -> None:
    """`between X ("A") and Y ("B")` yields both names with their defined terms."""
    sentence = (
        "This Agreement is made on 2 March 2026 between Fabrikam Components GmbH, a company registered "
        'in Germany ("Supplier") and Tailspin Toys, Inc. (the "Buyer").'
    )
    assert find_parties(sentence) == [
        Party("Fabrikam Components GmbH", ("Supplier",)),
        Party("Tailspin Toys, Inc.", ("Buyer",)),
    ]


def test_between_preamble_without_defined_terms_splits_on_and() -> None:
    """Without defined terms the clause splits at the first " and "."""
    assert find_parties("This contract is made between Alpha Ltd. and Beta Corp.") == [
        Party("Alpha Ltd."),
        Party("Beta Corp."),
    ]


def test_parties_line_lists_names() -> None:
    """A `Parties:` line lists names separated by semicolons or "and"."""
    assert find_parties("Parties: Alpha Ltd; Beta LLC and Gamma plc.") == [
        Party("Alpha Ltd"),
        Party("Beta LLC"),
        Party("Gamma plc"),
    ]


def test_contratada_line_gives_the_name_and_the_role() -> None:
    """`CONTRATADA: Name, inscrita...` gives the name, known also by the role word."""
    line = "CONTRATADA: Vértice Tecnologia S.A., inscrita no CNPJ sob o nº 98.765.432/0001-10."
    assert find_parties(line) == [Party("Vértice Tecnologia S.A.", ("CONTRATADA", "Contratada"))]


def test_sentences_without_a_preamble_give_no_parties() -> None:
    """Ordinary sentences, even with "between", declare no party."""
    assert find_parties("Disputes between the parties go to arbitration.") == []
    assert find_parties("The Supplier shall deliver the goods.") == []


def test_party_index_returns_the_first_party_mentioned() -> None:
    """The earliest mention, by name or defined term, is the party owing the obligation."""
    parties = PartyIndex()
    parties.add(Party("Fabrikam Components GmbH", ("Supplier",)))
    parties.add(Party("Tailspin Toys Ltd.", ("Buyer",)))

    assert parties.party_in("The Supplier shall indemnify the Buyer.") == "Fabrikam Components GmbH"
    assert parties.party_in("Tailspin Toys Ltd. will pay the Supplier.") == "Tailspin Toys Ltd."
    assert parties.party_in("Suppliers in general will be audited.") is None
    assert parties.names == ["Fabrikam Components GmbH", "Tailspin Toys Ltd."]
