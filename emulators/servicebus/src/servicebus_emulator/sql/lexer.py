"""Tokenizer for Service Bus SQL filter and action text."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from servicebus_emulator.sql.errors import FilterError

# Service Bus refuses longer filter or action text ("Max allowed length of sql expression is 1024
# chars", SqlRuleFilter/SqlRuleAction constructors); the same bound keeps parsing cheap.
MAX_EXPRESSION_LENGTH: Final = 1024

# Reserved words: a regular identifier may not be one of these (bracket it instead: [in]).
KEYWORDS: Final[frozenset[str]] = frozenset(
    {"AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "EXISTS", "TRUE", "FALSE"}
)

INT64_MAX: Final = 2**63 - 1

_OPERATORS: Final = ("<>", "!=", ">=", "<=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".", ";")


class TokenKind(enum.Enum):
    NUMBER = "number"
    STRING = "string"
    WORD = "word"  # a regular identifier or a keyword, decided by the parser
    DELIMITED = "delimited identifier"  # [name] or "name"
    OPERATOR = "operator"
    PARAMETER = "parameter"  # @name, bound to its value (any constant type, or None)
    END = "end of expression"


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str  # as written, for error messages
    value: object  # int/float for NUMBER, the unescaped text for STRING/DELIMITED, text otherwise
    position: int  # 0-based offset in the expression

    @property
    def keyword(self) -> str | None:
        """The keyword this token spells (upper case), if it is an unquoted keyword."""
        upper = self.text.upper()
        return upper if self.kind is TokenKind.WORD and upper in KEYWORDS else None

    def describe(self) -> str:
        """How error messages name this token."""
        if self.kind is TokenKind.END:
            return "end of expression"
        shown = self.text if len(self.text) <= 24 else self.text[:21] + "..."
        return f"position {self.position + 1} ({shown!r})"


def tokenize(text: str, parameters: Mapping[str, object] | None = None) -> list[Token]:
    """Split `text` into tokens, ending with an END token; FilterError on a lexical error.
    ``parameters`` are the filter's ``@name`` values (names with their ``@``, case-insensitive), as
    the management API's SqlFilter carries them; a parameter without a value is refused."""
    bound = {name.lower(): value for name, value in (parameters or {}).items()}
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise FilterError(
            f"expression is {len(text)} characters long; Service Bus allows at most {MAX_EXPRESSION_LENGTH}"
        )
    tokens: list[Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif char.isdecimal():
            index = _read_number(text, index, tokens)
        elif char.isalpha():
            end = index + 1
            while end < len(text) and (text[end].isalpha() or text[end].isdecimal() or text[end] == "_"):
                end += 1
            tokens.append(Token(TokenKind.WORD, text[index:end], text[index:end], index))
            index = end
        elif char == "'":
            value, end = _read_quoted(text, index, "'", "string")
            tokens.append(Token(TokenKind.STRING, text[index:end], value, index))
            index = end
        elif char in '["':
            value, end = _read_quoted(text, index, "]" if char == "[" else '"', "identifier")
            if not value:
                raise FilterError(f"at position {index + 1} ({text[index:end]!r}): empty identifier")
            tokens.append(Token(TokenKind.DELIMITED, text[index:end], value, index))
            index = end
        elif char == "@":
            end = index + 1
            while end < len(text) and (text[end].isalpha() or text[end].isdecimal() or text[end] == "_"):
                end += 1
            name = text[index:end]
            if name.lower() not in bound:
                raise FilterError(f"at position {index + 1} ({name!r}): the parameter has no value")
            tokens.append(Token(TokenKind.PARAMETER, name, bound[name.lower()], index))
            index = end
        else:
            operator = next((op for op in _OPERATORS if text.startswith(op, index)), None)
            if operator is None:
                raise FilterError(f"at position {index + 1} ({char!r}): unexpected character")
            tokens.append(Token(TokenKind.OPERATOR, operator, operator, index))
            index += len(operator)
    tokens.append(Token(TokenKind.END, "", "", len(text)))
    return tokens


def _read_number(text: str, start: int, tokens: list[Token]) -> int:
    """Read an integer (Int64), decimal or scientific constant (double); return the end offset."""
    end = _skip_digits(text, start)
    is_double = False
    if end + 1 < len(text) and text[end] == "." and text[end + 1].isdecimal():
        end = _skip_digits(text, end + 1)
        is_double = True
    if end < len(text) and text[end] in "eE":
        exponent = end + 1
        if exponent < len(text) and text[exponent] in "+-":
            exponent += 1
        if exponent < len(text) and text[exponent].isdecimal():
            end = _skip_digits(text, exponent)
            is_double = True
    literal = text[start:end]
    # str.isdecimal accepts other scripts' digits, which int()/float() understand as well.
    value: int | float = float(literal) if is_double else int(literal)
    if isinstance(value, int) and value > INT64_MAX:
        raise FilterError(
            f"at position {start + 1} ({literal!r}): integer constant outside the Int64 range; "
            "write it as a decimal (e.g. 1.0E20) if a double is meant"
        )
    tokens.append(Token(TokenKind.NUMBER, literal, value, start))
    return end


def _skip_digits(text: str, index: int) -> int:
    while index < len(text) and text[index].isdecimal():
        index += 1
    return index


def _read_quoted(text: str, start: int, closing: str, what: str) -> tuple[str, int]:
    """Read a quoted run whose closing character is escaped by doubling it; return (value, end)."""
    parts: list[str] = []
    index = start + 1
    while True:
        found = text.find(closing, index)
        if found < 0:
            raise FilterError(f"at position {start + 1}: unterminated {what} (missing {closing!r})")
        parts.append(text[index:found])
        if text.startswith(closing * 2, found):
            parts.append(closing)
            index = found + 2
        else:
            return "".join(parts), found + 1
