"""Value semantics: type rules, three-valued comparison, arithmetic and LIKE.

Service Bus binds operators like C#: numbers promote (long -> double), strings compare ordinally,
and operands of types with no operator between them make the result unknown. Unknown is None
here; a NULL constant and a missing property are unknown as well. Nothing in this module raises
for a value that came from a message: a type the service could not combine gives None.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import re
from collections.abc import Callable
from operator import add, mod, mul, sub, truediv
from typing import Any, Final

Truth = bool | None  # None is SQL's UNKNOWN

_INT64_SPAN: Final = 2**64
_INT64_MIN: Final = -(2**63)

_ORDERED_KINDS: Final = frozenset({"number", "string", "datetime", "timespan"})
_COMPARISONS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "=": lambda a, b: bool(a == b),
    "<>": lambda a, b: bool(a != b),
    "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}
_EVALUATION_ERRORS: Final = (TypeError, ValueError, ArithmeticError, decimal.InvalidOperation)
_OPERATIONS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": truediv,
    "%": mod,
}
# The DateTime/TimeSpan operators C# defines; other pairings are unknown.
_TEMPORAL_OPERATIONS: Final = frozenset(
    {
        ("datetime", "+", "timespan"),
        ("datetime", "-", "timespan"),
        ("datetime", "-", "datetime"),
        ("timespan", "+", "timespan"),
        ("timespan", "-", "timespan"),
    }
)


def kind_of(value: Any) -> str:
    """The Service Bus type family of a Python value (bool is not a number, unlike in Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float | decimal.Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime.datetime):
        return "datetime"
    if isinstance(value, datetime.timedelta):
        return "timespan"
    return f"other:{type(value).__name__}"


def compare(operator: str, left: Any, right: Any) -> Truth:
    """`left <operator> right`: True/False, or None when unknown or the types do not compare."""
    left_kind, right_kind = kind_of(left), kind_of(right)
    if left_kind == "null" or right_kind == "null" or left_kind != right_kind:
        return None
    ordering = operator not in ("=", "<>", "!=")
    if ordering and left_kind not in _ORDERED_KINDS:
        return None  # C# has no < on bool, Guid or byte[]
    try:
        if left_kind == "number":
            left, right = _promote(left, right)
        elif left_kind == "string" and ordering:
            # Ordinal comparison over UTF-16 code units, as .NET compares strings.
            left, right = (
                left.encode("utf-16-be", "surrogatepass"),
                right.encode("utf-16-be", "surrogatepass"),
            )
        return _COMPARISONS[operator](left, right)
    except _EVALUATION_ERRORS:
        return None  # e.g. decimal vs double, naive vs aware datetimes, Decimal('sNaN')


def equals(left: Any, right: Any) -> bool:
    """True only when `left = right` is TRUE (so unknown counts as not equal)."""
    return compare("=", left, right) is True


def arithmetic(operator: str, left: Any, right: Any) -> Any:
    """`left <operator> right` for + - * / %, or None when unknown or not defined for the types."""
    left_kind, right_kind = kind_of(left), kind_of(right)
    try:
        if left_kind == right_kind == "number":
            return _numeric(operator, *_promote(left, right))
        if operator == "+" and left_kind == right_kind == "string":
            return left + right
        if (left_kind, operator, right_kind) in _TEMPORAL_OPERATIONS:
            return _OPERATIONS[operator](left, right)
    except _EVALUATION_ERRORS:
        return None
    return None


def negate(value: Any) -> Any:
    """Unary minus: numbers and time spans; anything else is unknown."""
    kind = kind_of(value)
    try:
        if kind == "number":
            return _wrap_int64(-value) if isinstance(value, int) else -value
        if kind == "timespan":
            return -value
    except _EVALUATION_ERRORS:  # -timedelta.min overflows; -Decimal('sNaN') signals
        return None
    return None


def identity(value: Any) -> Any:
    """Unary plus: defined for numbers and time spans only."""
    return value if kind_of(value) in ("number", "timespan") else None


def like(value: Any, pattern: Any, escape: Any) -> Truth:
    """SQL LIKE with % and _ and an optional one-character escape; None if any operand is unknown."""
    if not isinstance(value, str) or not isinstance(pattern, str):
        return None
    if escape is not None and not (isinstance(escape, str) and len(escape) == 1):
        return None
    compiled = compile_like(pattern, escape)
    return None if compiled is None else compiled.fullmatch(value) is not None


@functools.lru_cache(maxsize=512)
def compile_like(pattern: str, escape: str | None) -> re.Pattern[str] | None:
    """The regular expression for a LIKE pattern, or None if the pattern ends with a lone escape."""
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == escape:
            if index + 1 == len(pattern):
                return None
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.compile("".join(parts), re.DOTALL)


def _promote(left: Any, right: Any) -> tuple[Any, Any]:
    """C# numeric promotion: long with double gives double; decimal with double does not bind."""
    if isinstance(left, float) or isinstance(right, float):
        if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
            raise TypeError("decimal and double do not combine")
        return float(left), float(right)
    if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
        return decimal.Decimal(left), decimal.Decimal(right)
    return left, right


def _numeric(operator: str, left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int):
        return _long(operator, left, right)
    if isinstance(left, float):
        return _double(operator, left, right)
    if operator in "/%" and right == 0:
        return None  # decimal division by zero throws in .NET
    return _OPERATIONS[operator](left, right)  # Decimal's % already keeps the dividend's sign


def _long(operator: str, left: int, right: int) -> int | None:
    """Int64 arithmetic: wraps on overflow, truncating division, remainder takes the dividend's sign."""
    if operator not in "/%":
        return _wrap_int64(_OPERATIONS[operator](left, right))
    if right == 0:
        return None  # DivideByZeroException in .NET
    quotient = abs(left) // abs(right)
    if (left < 0) != (right < 0):
        quotient = -quotient
    return _wrap_int64(quotient if operator == "/" else left - right * quotient)


def _double(operator: str, left: float, right: float) -> float:
    """IEEE double arithmetic: division by zero gives infinity or NaN, as in .NET."""
    if operator not in "/%":
        return float(_OPERATIONS[operator](left, right))
    if right != 0:
        return left / right if operator == "/" else math.fmod(left, right)
    if operator == "%" or left == 0 or math.isnan(left):
        return math.nan
    return math.copysign(math.inf, left) * math.copysign(1.0, right)


def _wrap_int64(value: int) -> int:
    return (value - _INT64_MIN) % _INT64_SPAN + _INT64_MIN
