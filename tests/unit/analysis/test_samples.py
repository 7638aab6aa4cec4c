"""Exact analysis of every checked-in sample, so any regression in the extractor shows up here."""

from __future__ import annotations

from tests.unit.analysis.support import SAMPLES, analyze_sample


def _obligation(party: str | None, text: str, due_date: str | None, page: int = 1) -> dict[str, object]:
    return {"party": party, "text": text, "due_date": due_date, "page": page}


PROVIDER = "Northwind Analytics Ltd."
CUSTOMER = "Contoso Retail Inc."
CONTRATANTE = "Aurora Comércio de Alimentos Ltda."
CONTRATADA = "Vértice Tecnologia S.A."
SUPPLIER = "Fabrikam Components GmbH"
BUYER = "Tailspin Toys Ltd."
CLIENT = "Litware Holdings plc"
CONSULTANT = "Adventure Works Consulting LLC"


def test_service_agreement_is_analyzed_exactly() -> None:
    """The English service agreement gives its two parties, seven obligations and a review flag."""
    assert analyze_sample("service-agreement.txt") == {
        "document_type": "contract",
        "parties": [PROVIDER, CUSTOMER],
        "dates": ["2026-01-15", "2026-03-01", "2026-03-31", "2026-04-10", "2027-01-14"],
        "obligations": [
            _obligation(
                PROVIDER,
                "1.1 The Provider shall deliver the document analysis platform described in Schedule A "
                "by 2026-03-01.",
                "2026-03-01",
            ),
            _obligation(
                PROVIDER,
                "1.2 The Provider must keep the platform available at least 99.5% of each calendar month "
                "and publish the availability figures on its status page.",
                None,
            ),
            _obligation(
                CUSTOMER,
                "2.1 The Customer shall pay each monthly invoice within 30 days of receipt.",
                "within 30 days",
            ),
            _obligation(
                CUSTOMER,
                "2.2 The Customer agrees to pay the one-off setup fee of EUR 12,000 by 31/03/2026.",
                "2026-03-31",
            ),
            _obligation(
                PROVIDER,
                "3.1 The Provider will send the Customer a quarterly service report no later than "
                "April 10, 2026, and every three months after that.",
                "2026-04-10",
            ),
            _obligation(
                PROVIDER,
                "4.1 The Provider is required to delete all documents received from the Customer within "
                "14 days after this Agreement ends.",
                "within 14 days",
            ),
            _obligation(
                PROVIDER,
                "5.1 If the platform is not delivered on the date set in clause 1.1, the Provider shall pay "
                "a penalty of 1% of the monthly fee for each day of delay, capped at 10% of that fee.",
                None,
            ),
        ],
        "page_count": 1,
        "review_required": True,
        "priority": "normal",
        "truncated": False,
    }


def test_portuguese_contract_is_analyzed_exactly() -> None:
    """CONTRATANTE/CONTRATADA lines name the parties; deve/deverá/obriga-se mark the obligations."""
    assert analyze_sample("contrato-prestacao-servicos.txt") == {
        "document_type": "contract",
        "parties": [CONTRATANTE, CONTRATADA],
        "dates": ["2026-01-20", "2026-02-01", "2026-03-15", "2026-04-30", "2027-01-31"],
        "obligations": [
            _obligation(
                CONTRATADA,
                "A CONTRATADA deverá implantar a plataforma de análise de contratos até 30/04/2026.",
                "2026-04-30",
            ),
            _obligation(
                CONTRATADA,
                "A CONTRATADA obriga-se a manter sigilo sobre todos os documentos recebidos da CONTRATANTE.",
                None,
            ),
            _obligation(
                CONTRATADA,
                "A CONTRATADA deve enviar relatório mensal de desempenho até o quinto dia útil de cada mês.",
                None,
            ),
            _obligation(
                CONTRATADA,
                "A CONTRATADA deverá corrigir falhas críticas no prazo de 2 (dois) dias úteis.",
                "no prazo de 2 (dois) dias úteis",
            ),
            _obligation(
                CONTRATANTE,
                "A CONTRATANTE deverá pagar o valor mensal de R$ 15.000,00 em até 10 dias após o "
                "recebimento da nota fiscal.",
                "em até 10 dias",
            ),
            _obligation(
                CONTRATANTE,
                "A CONTRATANTE obriga-se a fornecer acesso aos sistemas necessários até 15 de março de 2026.",
                "2026-03-15",
            ),
        ],
        "page_count": 1,
        "review_required": True,
        "priority": "normal",
        "truncated": False,
    }


def test_supply_agreement_pdf_is_analyzed_with_page_references() -> None:
    """Each obligation of the three-page PDF carries the page pypdf extracted it from."""
    assert analyze_sample("supply-agreement.pdf") == {
        "document_type": "contract",
        "parties": [SUPPLIER, BUYER],
        "dates": ["2026-03-02", "2026-05-15", "2026-06-30", "2027-12-31"],
        "obligations": [
            _obligation(
                SUPPLIER,
                "1.1 The Supplier shall deliver 5,000 units of part TT-220 to the warehouse of the Buyer "
                "by 2026-05-15.",
                "2026-05-15",
                page=1,
            ),
            _obligation(
                SUPPLIER,
                "1.2 The Supplier must provide a certificate of conformity with each shipment.",
                None,
                page=1,
            ),
            _obligation(
                BUYER,
                "2.1 The Buyer shall pay each invoice within 45 days of delivery.",
                "within 45 days",
                page=1,
            ),
            _obligation(
                BUYER,
                "3.1 The Buyer will inspect each shipment and report any defect no later than June 30, 2026.",
                "2026-06-30",
                page=2,
            ),
            _obligation(
                SUPPLIER,
                "3.2 The Supplier agrees to replace defective units within 10 business days of a defect "
                "report.",
                "within 10 business days",
                page=2,
            ),
            _obligation(
                SUPPLIER,
                "4.1 The Supplier shall indemnify the Buyer against third-party claims arising from "
                "defective units.",
                None,
                page=2,
            ),
            _obligation(
                None, "5.1 This Agreement will remain in force until 31/12/2027.", "2027-12-31", page=3
            ),
        ],
        "page_count": 3,
        "review_required": True,
        "priority": "normal",
        "truncated": False,
    }


def test_urgent_notice_is_high_priority_and_not_a_contract() -> None:
    """The short notice is a plain document with two party-less obligations and high priority."""
    assert analyze_sample("urgent-notice.txt") == {
        "document_type": "document",
        "parties": [],
        "dates": ["2026-02-05", "2026-02-06"],
        "obligations": [
            _obligation(
                None,
                "Each team lead must collect the new cards for their team from the reception desk by "
                "February 5, 2026.",
                "2026-02-05",
            ),
            _obligation(
                None,
                "Old cards must be returned to the reception desk within 2 days of collection.",
                "within 2 days",
            ),
        ],
        "page_count": 1,
        "review_required": False,
        "priority": "high",
        "truncated": False,
    }


def test_large_master_agreement_travels_by_reference_and_keeps_every_obligation() -> None:
    """The ~46 KB agreement is over the 16 KiB inline threshold and yields 120 obligations on 3 pages."""
    assert (SAMPLES / "master-agreement-large.txt").stat().st_size > 40_000
    result = analyze_sample("master-agreement-large.txt")
    obligations = result["obligations"]

    assert result["document_type"] == "contract"
    assert result["parties"] == [CLIENT, CONSULTANT]
    assert (result["page_count"], result["review_required"], result["priority"], result["truncated"]) == (
        3,
        False,
        "normal",
        False,
    )
    assert len(result["dates"]) == 61
    assert (result["dates"][0], result["dates"][1], result["dates"][-1]) == (
        "2026-01-05",
        "2026-02-02",
        "2027-03-22",
    )
    assert len(obligations) == 120
    assert [sum(1 for item in obligations if item["page"] == page) for page in (1, 2, 3)] == [40, 40, 40]
    assert obligations[40] == {
        "party": CONSULTANT,
        "text": "21.1 The Consultant shall deliver the user training report for work package 21 "
        "by 2026-06-22.",
        "due_date": "2026-06-22",
        "page": 2,
    }
    assert obligations[-1] == {
        "party": CLIENT,
        "text": "60.2 The Client shall approve or reject that report within 10 business days of receipt.",
        "due_date": "within 10 business days",
        "page": 3,
    }
