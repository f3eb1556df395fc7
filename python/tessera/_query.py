"""The query builder: ``C.priority > 10`` writes the text ``priority > 10``.

Expressions combine with ``&`` (and), ``|`` (or) and ``~`` (not); ``str(expr)`` is the
query text, which any call taking a query accepts in its place.
"""

from __future__ import annotations

import datetime
import enum
import math
from typing import Any

__all__ = ["C", "Expr", "FieldRef", "literal"]


# The escapes of the query syntax's strings (every other character stands for itself, control
# characters included), as the Rust side prints a string literal.
_ESCAPES = str.maketrans({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"})


def quoted(text: str) -> str:
    """``text`` as a string literal of the query syntax: double-quoted, with ``\\"``,
    ``\\\\``, ``\\n`` and ``\\t`` escapes and every other character as it is (the grammar
    has no other escape, and takes any other character inside quotes)."""
    return '"' + text.translate(_ESCAPES) + '"'


def datetime_text(value: datetime.datetime) -> str:
    """How a ``datetime`` is stored: ISO 8601 text, an aware one in UTC (the same instant), so
    that text order is time order for every aware datetime whatever its offset (``10:00+05:00``
    is ``05:00+00:00``, before ``06:00+00:00``); a naive one as it is."""
    if value.utcoffset() is None:
        return value.isoformat()
    return value.astimezone(datetime.timezone.utc).isoformat()


def literal(value: Any) -> str:
    """``value`` as a literal of the query syntax."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, enum.Enum):
        return literal(value.name)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a query cannot compare with {value!r}")
        return repr(value)
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, datetime.datetime):
        return quoted(datetime_text(value))
    raise TypeError(f"a query cannot compare with a {type(value).__name__}")


class Expr:
    """A query predicate; ``str()`` gives its text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __and__(self, other: "Expr") -> "Expr":
        return Expr(f"({self.text}) and ({_text(other)})")

    def __or__(self, other: "Expr") -> "Expr":
        return Expr(f"({self.text}) or ({_text(other)})")

    def __invert__(self) -> "Expr":
        return Expr(f"not ({self.text})")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def __bool__(self) -> bool:
        raise TypeError("use & | ~ to combine query expressions, not and/or/not")


def _text(other: Any) -> str:
    if isinstance(other, Expr):
        return other.text
    if isinstance(other, str):
        return other
    raise TypeError(f"cannot combine a query expression with a {type(other).__name__}")


class FieldRef:
    """A field of the records (``C.address.city`` for a nested one)."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> "FieldRef":
        if name.startswith("__"):
            raise AttributeError(name)
        return FieldRef(f"{self._path}.{name}")

    def _compare(self, op: str, value: Any) -> Expr:
        if isinstance(value, enum.Enum) and op in ("==", "!="):
            negation = " not" if op == "!=" else ""
            if negation:
                return Expr(f"not ({self._path} is {value.name})")
            return Expr(f"{self._path} is {value.name}")
        if value is None and op in ("==", "!="):
            return Expr(f"{self._path} is{' not' if op == '!=' else ''} null")
        return Expr(f"{self._path} {op} {literal(value)}")

    def __eq__(self, value: Any) -> Expr:  # type: ignore[override]
        return self._compare("==", value)

    def __ne__(self, value: Any) -> Expr:  # type: ignore[override]
        return self._compare("!=", value)

    def __lt__(self, value: Any) -> Expr:
        return self._compare("<", value)

    def __le__(self, value: Any) -> Expr:
        return self._compare("<=", value)

    def __gt__(self, value: Any) -> Expr:
        return self._compare(">", value)

    def __ge__(self, value: Any) -> Expr:
        return self._compare(">=", value)

    __hash__ = None  # type: ignore[assignment]

    def between(self, low: Any, high: Any) -> Expr:
        """``low <= field <= high``."""
        return Expr(f"{self._path} between {literal(low)} and {literal(high)}")

    def isin(self, values: Any) -> Expr:
        """The field equals one of ``values`` (an iterable other than a str or bytes, whose
        items would be taken one by one; none: no record)."""
        if isinstance(values, (str, bytes, bytearray)):
            raise TypeError(f"isin takes a list of values, not a {type(values).__name__} (its characters would be the values)")
        items = ", ".join(literal(value) for value in values)
        # `x in ()` is no query text: an empty list matches nothing (`false`).
        return Expr(f"{self._path} in ({items})" if items else "false")

    def starts_with(self, prefix: str) -> Expr:
        """A str field that starts with ``prefix``."""
        return Expr(f"{self._path} starts_with {literal(prefix)}")

    def ends_with(self, suffix: str) -> Expr:
        """A str field that ends with ``suffix``."""
        return Expr(f"{self._path} ends_with {literal(suffix)}")

    def contains(self, part: str) -> Expr:
        """A str field that contains ``part``."""
        return Expr(f"{self._path} contains {literal(part)}")

    def __repr__(self) -> str:
        return f"C.{self._path}"


class _Fields:
    """``C.name`` is the field ``name``."""

    def __getattr__(self, name: str) -> FieldRef:
        if name.startswith("__"):
            raise AttributeError(name)
        return FieldRef(name)


C = _Fields()
