"""tessera's exceptions: one hierarchy under :class:`Error`, each with the fields a caller needs.

Every exception carries its message and keyword fields as attributes (``collection``, ``key``,
``path``, ``column``…); a field the error does not have is ``None``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Error",
    "NotADatabase",
    "Corrupted",
    "Full",
    "ReadOnly",
    "Closed",
    "NoSuchCollection",
    "SchemaError",
    "SchemaMismatch",
    "SchemaViolation",
    "UnsupportedType",
    "ConstraintError",
    "DuplicateKey",
    "UniqueViolation",
    "NotFound",
    "TransactionConflict",
    "QueryError",
    "QuerySyntaxError",
    "InvalidName",
    "LimitExceeded",
    "EncodeError",
    "JsonError",
]


class Error(Exception):
    """Any error from tessera. ``message`` is the text; other fields depend on the class."""

    collection: str | None = None
    key: str | None = None
    path: str | None = None

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self):  # picklable with its fields
        return (_rebuild, (type(self), self.message, self.fields))


def _rebuild(cls: type, message: str, fields: dict) -> Error:
    return cls(message, **fields)


class NotADatabase(Error):
    """The file is not a tessera database (``path``), or of a newer format (``version``)."""


class Corrupted(Error):
    """The file or a document is damaged."""


class Full(Error):
    """The database reached its size ceiling (``ceiling_bytes``) or the disk is full."""


class ReadOnly(Error):
    """The database was opened read-only (``path``) and the call would write."""


class Closed(Error):
    """The database (or snapshot) was closed before this call."""


class TransactionConflict(Error):
    """A ``with db.write()`` block read data (``read``: a get, a query or a count, in
    ``collection``) that another writer changed before the block committed. Nothing was
    written: run the block again, as with SQLite's ``SQLITE_BUSY`` or a serialization failure
    in PostgreSQL."""


class NoSuchCollection(Error):
    """The file has no collection named ``collection``."""


class SchemaError(Error):
    """A schema or a value disagrees with what is stored."""


class SchemaMismatch(SchemaError):
    """The stored schema of ``collection`` differs from the dataclass (``reason``), or a
    stored record does not fit it (``key``, ``path``)."""

    reason: str | None = None


class SchemaViolation(SchemaError):
    """A value written to ``collection`` does not fit its schema: the field ``path``
    (dotted, with ``[index]``), the record ``key`` (JSON text, empty if unknown) and the
    ``problem``. Nothing was written."""

    problem: str | None = None


class UnsupportedType(SchemaError, TypeError):
    """A dataclass field has a type tessera cannot store: ``path`` names the field and
    ``annotation`` is its type. Raised when the class is decorated."""

    annotation: Any = None


class ConstraintError(Error):
    """A write broke a key or uniqueness rule; the transaction was rolled back."""


class DuplicateKey(ConstraintError):
    """``insert`` of a ``key`` that exists in ``collection``."""


class UniqueViolation(ConstraintError):
    """A unique ``index`` of ``collection`` already holds the value for ``holder`` (the
    record being written is ``key``)."""

    index: str | None = None
    holder: str | None = None


class NotFound(Error, KeyError):
    """No record with ``key`` in ``collection`` (``patch``, ``Collection[key]``); ``key`` is
    the text the other errors give a record's key (JSON, a JSON array for a composite key)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class QueryError(Error):
    """A query names an unknown field or compares mismatched types."""


class QuerySyntaxError(QueryError):
    """A query does not parse: ``column`` (1-based, in characters) and ``problem``."""

    column: int | None = None
    problem: str | None = None


class InvalidName(Error, ValueError):
    """A collection or dictionary ``name`` tessera does not accept."""

    name: str | None = None


class LimitExceeded(Error):
    """A documented limit was reached (``limit``)."""

    limit: int | None = None


class EncodeError(Error, TypeError):
    """A Python value cannot be stored: ``path`` inside it and the ``problem``."""

    problem: str | None = None


class JsonError(Error, ValueError):
    """Text given to ``from_json`` is not JSON (``problem``)."""

    problem: str | None = None
