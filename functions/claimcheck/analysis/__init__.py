"""Document analysis port and its default implementation (a contract-obligation extractor).

Importing this package is cheap: pypdf is loaded only when a PDF is analyzed.
"""

from claimcheck.analysis.extractor import MAX_OBLIGATIONS, ContractObligationExtractor
from claimcheck.analysis.model import (
    AnalysisError,
    AnalysisResult,
    Analyzer,
    Obligation,
    leading_bytes_read,
)

__all__ = [
    "MAX_OBLIGATIONS",
    "AnalysisError",
    "AnalysisResult",
    "Analyzer",
    "ContractObligationExtractor",
    "Obligation",
    "leading_bytes_read",
]
