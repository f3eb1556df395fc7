"""tessera: an embedded, typed, reactive data store, from Python.

Collections of dataclasses with queries and live subscriptions, a persisted dictionary and
tessera's binary format, in one LMDB file that a Rust program can share::

    import dataclasses, tessera

    @tessera.record(key="id", indexes=["priority"])
    @dataclasses.dataclass
    class Task:
        id: int
        title: str
        priority: int

    with tessera.open("tasks.tessera") as db:
        tasks = db.collection(Task)
        tasks.insert(Task(1, "write the docs", 5))
        print([t.title for t in tasks.query("priority > 2")])
"""

from __future__ import annotations

import dataclasses
import json
import contextvars
import math
import operator
import os
import re
from collections.abc import MutableMapping
from typing import Any, Dict, Generic, Iterator, List, Optional, Sequence, Type, TypeVar, Union

from . import _native
from ._live import Changed, Closed as ClosedEvent, Deleted, Initial, ObjectSubscription, Subscription, Updated
from ._query import C, Expr, FieldRef
from ._schema import RecordType, WrongValue, exact_float
from .errors import *  # noqa: F401,F403 (the hierarchy is part of the API)
from .errors import Closed, DuplicateKey, Error, NotFound, SchemaMismatch, SchemaViolation, UnsupportedType

__all__ = [
    "open",
    "Database",
    "record",
    "Collection",
    "Results",
    "Transaction",
    "Snapshot",
    "Dictionary",
    "Documents",
    "Subscription",
    "ObjectSubscription",
    "Initial",
    "Changed",
    "ClosedEvent",
    "Updated",
    "Deleted",
    "C",
    "Expr",
    "FieldRef",
    "dumps",
    "loads",
    "from_json",
    "to_json",
    "Value",
] + list(errors.__all__)  # type: ignore[name-defined]  # noqa: F405

from . import errors  # noqa: E402

T = TypeVar("T")
Query = Union[str, Expr, None]

dumps = _native.dumps
loads = _native.loads
from_json = _native.from_json
to_json = _native.to_json
Value = _native.Value

# Key types and how a new collection stores them (a Rust record type reading the file must
# use the same widths: i64 for int keys).
_KEY_KINDS = {int: "i64", str: "string", bytes: "bytes", bool: "bool", float: "f64"}


class RecordSpec:
    """What ``@tessera.record`` attaches to a dataclass: its collection name, key, indexes and
    the stored schema."""

    def __init__(self, cls: type, name: str, key: Sequence[str], indexes: Sequence[str], unique: Sequence[str]) -> None:
        self.type = RecordType(cls)
        self.name = name
        self.key = list(key)
        hints = {field: hint for field, hint in _field_hints(cls).items()}
        kinds = []
        for field in self.key:
            if field not in hints:
                raise UnsupportedType(f"{cls.__name__}: key field `{field}` is not a field", path=field, annotation=None)
            kind = _KEY_KINDS.get(hints[field])
            if kind is None:
                raise UnsupportedType(
                    f"{cls.__name__}: key field `{field}` must be int, str, bytes, bool or float, not {hints[field]!r}",
                    path=field,
                    annotation=hints[field],
                )
            kinds.append(kind)
        for field in list(indexes) + list(unique):
            if field.split(".")[0] not in hints:
                raise UnsupportedType(f"{cls.__name__}: index field `{field}` is not a field", path=field, annotation=None)
        # Float key fields: -0.0 is stored as 0.0 and NaN refused, by the extension's encoder
        # for a record's key field and by `native_key` for a key given to a read or delete.
        self._float_parts = [index for index, kind in enumerate(kinds) if kind == "f64"]
        encodings = self.type.encoding[2]
        for position, (field, encoding) in enumerate(encodings):
            if field in self.key and encoding == ("float",):
                encodings[position] = (field, ("float_key",))
        index_list = [{"path": path, "unique": False, "ready": True} for path in indexes]
        index_list += [{"path": path, "unique": True, "ready": True} for path in unique]
        self.schema = {"version": 1, "key_fields": self.key, "key_kinds": kinds, "shape": self.type.shape, "indexes": index_list}

    def key_of(self, obj: Any) -> Any:
        """The key of a record, as the native layer takes it."""
        if len(self.key) == 1:
            return getattr(obj, self.key[0])
        return [getattr(obj, field) for field in self.key]

    def native_key(self, key: Any) -> Any:
        """``key`` as the extension takes it: a list for a composite key, and each float part
        normalised as the store compares keys (an int as the float it equals, ``-0.0`` as
        ``0.0``; NaN and an int with no exact float value refused with
        :class:`tessera.SchemaViolation`)."""
        if len(self.key) > 1 and isinstance(key, (tuple, list)):
            key = list(key)
            for index in self._float_parts:
                if index < len(key):
                    key[index] = self._float_key(key[index], self.key[index])
            return key
        if self._float_parts and len(self.key) == 1:
            return self._float_key(key, self.key[0])
        return key

    def _float_key(self, part: Any, field: str) -> Any:
        if isinstance(part, bool) or not isinstance(part, (int, float)):
            return part  # the extension names the key field and its type
        try:
            value = exact_float(part, field)
        except WrongValue as error:
            raise SchemaViolation(
                f"collection {self.name!r}, key field `{field}`: {error.problem}", collection=self.name, key=repr(part), path=field, problem=error.problem
            ) from None
        if math.isnan(value):
            problem = "NaN cannot be a key (it equals no value, itself included)"
            raise SchemaViolation(f"collection {self.name!r}, key field `{field}`: {problem}", collection=self.name, key="NaN", path=field, problem=problem)
        return 0.0 if value == 0.0 else value


def _field_hints(cls: type) -> Dict[str, Any]:
    import typing

    return typing.get_type_hints(cls)


def record(
    _cls: Optional[type] = None,
    *,
    key: Union[str, Sequence[str]] = "id",
    indexes: Sequence[str] = (),
    unique: Sequence[str] = (),
    name: Optional[str] = None,
) -> Any:
    """Makes a dataclass a record type: ``@tessera.record(key="id", indexes=["priority"],
    unique=["email"])``. The class is made a dataclass if it is not one. Its schema is built
    now, so a field of a type tessera cannot store raises :class:`tessera.UnsupportedType`
    naming the field. The collection's name is ``name`` or the class name in lower case."""

    def decorate(cls: type) -> type:
        if not dataclasses.is_dataclass(cls):
            cls = dataclasses.dataclass(cls)
        keys = [key] if isinstance(key, str) else list(key)
        cls.__tessera_record__ = RecordSpec(cls, name or cls.__name__.lower(), keys, indexes, unique)  # type: ignore[attr-defined]
        return cls

    return decorate(_cls) if _cls is not None else decorate


def _spec(cls: type) -> RecordSpec:
    spec = getattr(cls, "__tessera_record__", None)
    if spec is None or spec.type.cls is not cls:
        raise TypeError(f"{cls.__name__} is not a record type: decorate it with @tessera.record(key=...)")
    return spec


def open(  # noqa: A001 (the module's entry point, as sqlite3.connect or shelve.open)
    path: Union[str, os.PathLike],
    durability: str = "immediate",
    *,
    buffered_delay_ms: int = 100,
    read_only: bool = False,
    map_size_max_bytes: Optional[int] = None,
) -> "Database":
    """Opens (or creates) a database file. ``durability`` is ``"immediate"`` (each commit is
    on stable storage before it returns) or ``"buffered"`` (safe from a process kill at once,
    flushed within ``buffered_delay_ms``). A file that is not a tessera database raises
    :class:`tessera.NotADatabase`. Use it as a context manager to close it."""
    native = _native.Database(os.fspath(path), durability, buffered_delay_ms, read_only, map_size_max_bytes)
    return Database(native)


class Database:
    """An open database file (see :func:`tessera.open`)."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._collections: Dict[type, Collection[Any]] = {}
        # The write block open in the current context: per thread, and per asyncio task (a
        # task runs in a copy of the context it was created in), so that a block awaiting in
        # one task does not take another task's writes.
        self._current: contextvars.ContextVar[Optional[Transaction]] = contextvars.ContextVar(f"tessera_write_block_{id(self)}", default=None)

    @property
    def path(self) -> str:
        """The file."""
        return self._native.path

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    def close(self) -> None:
        """Flushes and closes the file; later calls raise :class:`tessera.Closed`."""
        self._native.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"tessera.Database({self.path!r}{', closed' if self.closed else ''})"

    def collection(self, cls: Type[T]) -> "Collection[T]":
        """The collection of record type ``cls``, created with its schema if the file has none
        (:class:`tessera.SchemaMismatch` if the stored one differs)."""
        found = self._collections.get(cls)
        if found is None:
            found = Collection(self, cls)
        return found

    def collection_names(self) -> List[str]:
        """Names of the collections in the file (Rust- or Python-made)."""
        return self._native.collection_names()

    def write(self) -> "Transaction":
        """A write transaction: ``with db.write() as tx:``. Writes made in the block (through
        ``tx``, from any thread, or any collection of this database, on this thread) commit
        together when it ends (documents and dictionaries are not part of a block: their writes
        in it raise :class:`tessera.Error`) (``tx`` raises :class:`tessera.Error` outside the block); an exception rolls them all back and propagates unchanged. The block belongs to
        the thread, and to the asyncio task, that opened it: another task's writes while it
        awaits are not the block's (a task created inside the block shares it)."""
        return Transaction(self)

    def read(self) -> "Snapshot":
        """A snapshot: ``with db.read() as snap:``; every read through it sees the database as
        it was when the block began."""
        return Snapshot(self)

    def dictionary(self, name: str = "default") -> "Dictionary":
        """The dictionary ``name``: a :class:`collections.abc.MutableMapping` of str keys to
        JSON-like values, persisted in the background (see :meth:`Dictionary.flush`)."""
        return Dictionary(self._native.dictionary(name), self)

    def documents(self, cls: Type[T], name: Optional[str] = None) -> "Documents[T]":
        """Field-decomposed documents of dataclass ``cls`` (stored one key per top-level field,
        so one field can be written and observed alone), in the document collection ``name``
        (the class name in lower case by default)."""
        name = name or cls.__name__.lower()
        return Documents(self._native.documents(name), cls, name, self)

    def sync(self) -> None:
        """Flushes every commit so far to stable storage."""
        self._native.sync()

    def _transaction(self) -> Optional["Transaction"]:
        return self._current.get()


class Collection(Generic[T]):
    """The records of one dataclass: ``db.collection(Task)`` or ``Collection(db, Task)``."""

    def __init__(self, db: Database, cls: Type[T]) -> None:
        self._db = db
        self._cls = cls
        self._spec = _spec(cls)
        self.name = self._spec.name
        native = db._native
        native.create_collection(self.name, json.dumps(self._spec.schema))
        # Records are encoded by the extension along this encoder (attributes read by the
        # stored schema), and read records are built by it along this plan.
        self._encoder = self._spec.type.native_encoder
        self._plan = self._spec.type.native_plan
        # Read on every call: kept here rather than looked up through the database each time.
        self._native = native
        self._current = db._current
        # A key given to a read is passed on as it is (one key field, not a float): the
        # common case, without a call to `native_key`.
        self._plain_key = len(self._spec.key) == 1 and not self._spec._float_parts
        db._collections[cls] = self

    def __repr__(self) -> str:
        return f"tessera.Collection({self._cls.__name__}, name={self.name!r})"

    # Writes -----------------------------------------------------------------------------

    def insert(self, obj: T) -> None:
        """Stores a new record: :class:`tessera.DuplicateKey` if its key exists,
        :class:`tessera.SchemaViolation` (with the field path) if a value has the wrong type,
        :class:`tessera.UniqueViolation` for a taken unique value. Nothing is written then."""
        transaction = self._current.get()
        if transaction is not None:
            transaction._block.insert(self.name, self._encoder, obj)
            return
        self._native.write_records("insert", self.name, self._encoder, (obj,))

    def upsert(self, obj: T) -> Optional[str]:
        """Stores the record, replacing one with its key: "inserted", "updated" or
        "unchanged" (None inside ``db.write()``, where it is known at the commit)."""
        transaction = self._current.get()
        if transaction is not None:
            transaction._block.upsert(self.name, self._encoder, obj)
            return None
        return self._native.write_records("upsert", self.name, self._encoder, (obj,))[0]

    def insert_many(self, objs: Sequence[T]) -> None:
        """Inserts every record in one transaction (all or nothing)."""
        self._many("insert", objs)

    def upsert_many(self, objs: Sequence[T]) -> None:
        """Upserts every record in one transaction (all or nothing)."""
        self._many("upsert", objs)

    def _many(self, kind: str, objs: Sequence[T]) -> None:
        transaction = self._db._transaction()
        if transaction is not None:
            write = transaction._block.insert if kind == "insert" else transaction._block.upsert
            for obj in objs:
                write(self.name, self._encoder, obj)
            return
        self._db._native.write_records(kind, self.name, self._encoder, objs)

    def delete(self, key: Any) -> bool:
        """Deletes the record at ``key`` (a tuple for a composite key): whether one was there
        (True inside ``db.write()``, where it is known at the commit)."""
        key = self._spec.native_key(key)
        transaction = self._db._transaction()
        if transaction is not None:
            transaction._block.delete(self.name, key)
            return True
        return self._db._native.commit([("delete", self.name, key)])[0] != "unchanged"

    def delete_many(self, keys: Sequence[Any]) -> None:
        """Deletes the records at ``keys`` in one transaction."""
        native_key = self._spec.native_key
        transaction = self._db._transaction()
        if transaction is not None:
            delete = transaction._block.delete
            for key in keys:
                delete(self.name, native_key(key))
            return
        if len(self._spec.key) == 1 and not self._spec._float_parts:
            self._db._native.delete_keys(self.name, keys if type(keys) is list else list(keys))
        else:
            self._db._native.delete_keys(self.name, [native_key(key) for key in keys])

    def patch(self, key: Any, **changes: Any) -> T:
        """Changes some fields of the record at ``key`` and stores it; returns the new record.
        :class:`tessera.NotFound` if there is none."""
        current = self.get(key)
        if current is None:
            raise self._not_found(key)
        updated = dataclasses.replace(current, **changes)  # type: ignore[type-var]
        self.upsert(updated)
        return updated

    # Reads ------------------------------------------------------------------------------

    def get(self, key: Any) -> Optional[T]:
        """The record at ``key`` (a tuple for a composite key), or None. Inside
        ``db.write()``, the transaction's own writes are seen."""
        if not self._plain_key:
            key = self._spec.native_key(key)
        transaction = self._current.get()
        if transaction is not None:
            # The block's own write at the key if it made one, else the stored record,
            # recorded for the commit to check that it still holds.
            return transaction._block.get(self.name, key, self._plan)
        return self._native.get(self.name, key, self._plan)

    def get_many(self, keys: Sequence[Any]) -> List[Optional[T]]:
        """The records at ``keys`` (None where absent), read in one snapshot."""
        native_key = self._spec.native_key
        transaction = self._db._transaction()
        reads = transaction._reads if transaction is not None else None
        return self._db._native.get_many(self.name, [native_key(key) for key in keys], self._plan, reads)

    def __getitem__(self, key: Any) -> T:
        found = self.get(key)
        if found is None:
            raise self._not_found(key)
        return found

    def _not_found(self, key: Any) -> NotFound:
        """:class:`tessera.NotFound` for ``key``, whose ``key`` field is the text the
        extension's errors give a record's key (``DuplicateKey.key``, ``UniqueViolation.key``:
        the value as JSON, a JSON array for a composite key)."""
        shown = self._native.display_key(self.name, self._spec.native_key(key)) or repr(key)
        return NotFound(f"collection {self.name!r}: no record with key {shown}", collection=self.name, key=shown)

    def __contains__(self, key: Any) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[T]:
        return iter(self.query())

    def query(
        self, query: Query = None, *, order_by: Union[str, Sequence[str], None] = None, offset: int = 0, limit: Optional[int] = None
    ) -> "Results[T]":
        """The records matching ``query`` (text such as ``"priority > 10"``, or ``C.priority >
        10``; None for all), in primary-key order or by ``order_by`` (field paths, ``-`` before
        one for descending), after ``offset``, at most ``limit``. A syntax error raises
        :class:`tessera.QuerySyntaxError` with its ``column``.

        ``order_by`` becomes the query's ``order by`` clause, run by the database (through an
        index where one fits), with SQL's rule for None: last ascending, first descending; the
        query text may also carry its own ``order by``, ``limit`` and ``offset``. Given both,
        the arguments pick from the text's results, as slicing twice would:
        ``query("limit 3", limit=5)`` gives at most 3 records, ``query("offset 2", offset=3)``
        starts at the sixth; ``count()`` of the results is the number iterated."""
        return Results(self, _with_order(_query_text(query), order_by), offset, limit, None)

    def count(self, query: Query = None) -> int:
        """How many records match ``query``."""
        return self._db._native.count(self.name, _query_text(query), _reads_of(self._db))

    def explain(self, query: Query = None) -> str:
        """How ``query`` would run."""
        return self._db._native.explain(self.name, _query_text(query))

    def subscribe(self, query: Query = None, *, offset: int = 0, limit: Optional[int] = None) -> Subscription[T]:
        """A live query: iterate it for :class:`Initial`, then :class:`Changed` per commit
        that changes the result, then :class:`ClosedEvent`. ``offset`` and ``limit`` pick
        from the results of the text's own, as in :meth:`query`."""
        native = self._db._native.subscribe(self.name, _query_text(query), offset, limit, self._plan)
        return Subscription(native, _built)

    def subscribe_object(self, key: Any) -> ObjectSubscription:
        """A live record: iterate it for :class:`Initial` (``result`` the record at ``key``, a
        tuple for a composite key, or None), then :class:`Updated` (``value``) per commit
        that writes it and :class:`Deleted` per commit that deletes it, then
        :class:`ClosedEvent`. A record inserted again after a delete is ``Updated``."""
        native = self._db._native.subscribe_object(self.name, self._spec.native_key(key), self._plan)
        return ObjectSubscription(native, _built)

def _reads_of(db: Database) -> Any:
    """The read set of the write block open on this thread, if any (see :class:`Transaction`)."""
    transaction = db._transaction()
    return transaction._reads if transaction is not None else None


def _built(record: Any) -> Any:
    """A record the extension built already."""
    return record


def _query_text(query: Query) -> Optional[str]:
    if query is None or isinstance(query, str):
        return query
    if isinstance(query, Expr):
        return query.text
    raise TypeError(f"a query is text or a tessera.C expression, not {type(query).__name__}")


class Results(Generic[T]):
    """A query's matches: iterate them (each record is built when reached), or ask for
    ``count()`` and ``explain()``. Each iteration runs the query again in a fresh snapshot."""

    def __init__(self, collection: Collection[T], text: Optional[str], offset: int, limit: Optional[int], snapshot: Any) -> None:
        self._collection = collection
        self._text = text
        self._offset, self._limit = _window(offset, limit)
        self._snapshot = snapshot

    def __iter__(self) -> Iterator[T]:
        if self._snapshot is not None:
            return self._snapshot.query(self._collection.name, self._text, self._offset, self._limit, self._collection._plan)
        db = self._collection._db
        return db._native.query(self._collection.name, self._text, self._offset, self._limit, self._collection._plan, _reads_of(db))

    def first(self) -> Optional[T]:
        """The first match, or None."""
        limit = 1 if self._limit is None else min(self._limit, 1)
        return next(iter(Results(self._collection, self._text, self._offset, limit, self._snapshot)), None)

    def count(self) -> int:
        """How many records iterating gives (the text's and the arguments' offset and limit
        applied)."""
        if self._snapshot is not None:
            total = self._snapshot.count(self._collection.name, self._text)
        else:
            db = self._collection._db
            total = db._native.count(self._collection.name, self._text, _reads_of(db))
        total = max(0, total - self._offset)
        return total if self._limit is None else min(total, self._limit)

    def explain(self) -> str:
        """How the query runs."""
        return self._collection._db._native.explain(self._collection.name, self._text, self._offset, self._limit)

    def __repr__(self) -> str:
        return f"tessera.Results({self._collection.name}, {self._text!r})"


def _window(offset: Any, limit: Any) -> Any:
    """``offset`` and ``limit`` as the ints a query takes: TypeError for a value that is no
    int (``1.5``), ValueError for a negative one (iterating would refuse either, and
    ``count()`` would compute with it)."""
    offset = operator.index(offset)
    limit = None if limit is None else operator.index(limit)
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"a query's offset and limit are 0 or more, not offset={offset!r}, limit={limit!r}")
    return offset, limit


def _with_order(text: Optional[str], order_by: Union[str, Sequence[str], None]) -> Optional[str]:
    """``text`` with an ``order by`` clause for ``order_by`` (field paths, ``-`` before one for
    descending)."""
    if order_by is None:
        return text
    fields = [order_by] if isinstance(order_by, str) else list(order_by)
    if not fields:
        return text
    keys = ", ".join(f"{field[1:]} desc" if field.startswith("-") else field.lstrip("+") for field in fields)
    # Before the text's own `limit` and `offset`, which end a query (the grammar's order).
    text = text or ""
    window = _WINDOW_CLAUSES.search(text)
    start = len(text) if window is None else window.start()
    return f"{text[:start].rstrip()} order by {keys} {text[start:]}".strip()


# A query text's closing `limit N` and `offset N` clauses.
_WINDOW_CLAUSES = re.compile(r"(?<![\w.])(?:limit\s+\d+\s*)?(?:(?<![\w.])offset\s+\d+)?\s*$", re.IGNORECASE)


class Transaction:
    """``with db.write() as tx:`` — the writes of the block commit together at its end, in
    one LMDB transaction with the GIL released, or not at all.

    Writes are checked and queued as they are made and applied at the end: a key or
    uniqueness conflict raises there (:class:`tessera.DuplicateKey`,
    :class:`tessera.UniqueViolation`) and nothing is written. An exception in the block
    discards the queue and propagates unchanged.

    Reads in the block (``get``, ``get_many``, queries and counts) see the committed data; a
    ``get`` also sees the block's own writes, a query does not. The block is serializable:
    each read is recorded with what it saw and checked again inside the commit, before any
    write, and if another writer changed any of it in between, the commit writes nothing and
    raises :class:`tessera.TransactionConflict` (run the block again). So a read-modify-write
    such as ``c.upsert(replace(c.get(k), n=c.get(k).n + 1))`` never loses an update."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._reads: Any = None
        self._block: Any = None

    def __enter__(self) -> "Transaction":
        if self._db._transaction() is not None:
            raise Error("a write transaction is already open on this thread or task (transactions do not nest)")
        if self._db.closed:
            raise Closed(f"{self._db.path}: the database is closed")
        # What the block reads, checked again by its commit (the extension's ReadSet), and
        # its queued writes with their overlay for reads in the block: in the extension, so
        # that a write or a read in the block is one native call.
        self._reads = _native.ReadSet()
        self._block = _native.WriteBlock(self._db._native, self._reads)
        self._token = self._db._current.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        try:
            self._db._current.reset(self._token)
        except ValueError:  # exited in another context than it was entered in
            self._db._current.set(None)
        if exc_type is not None:
            self._block.discard()
            return None  # the exception propagates as it is
        self._block.commit()
        return None

    def _open_block(self) -> Any:
        """The block's queue: :class:`tessera.Error` before the block began (it raises once
        it has ended). This transaction's own methods write into it from any thread."""
        if self._block is None:
            raise Error("the transaction has not begun (use it inside `with db.write() as tx:`)")
        return self._block

    def insert(self, obj: Any) -> None:
        """Queues an insert of ``obj`` into its record type's collection."""
        collection = self._db.collection(type(obj))
        self._open_block().insert(collection.name, collection._encoder, obj)

    def upsert(self, obj: Any) -> None:
        """Queues an upsert of ``obj``."""
        collection = self._db.collection(type(obj))
        self._open_block().upsert(collection.name, collection._encoder, obj)

    def delete(self, cls: type, key: Any) -> None:
        """Queues the deletion of the ``cls`` record at ``key``."""
        collection = self._db.collection(cls)
        self._open_block().delete(collection.name, collection._spec.native_key(key))

    def get(self, cls: Type[T], key: Any) -> Optional[T]:
        """The ``cls`` record at ``key``, with this transaction's writes applied."""
        collection = self._db.collection(cls)
        return self._open_block().get(collection.name, collection._spec.native_key(key), collection._plan)


class Snapshot:
    """``with db.read() as snap:`` — reads that all see one state of the database. The
    snapshot's read transaction is held by a thread of its own until the block ends: keep
    it short (old pages are kept while it is open)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._native: Any = None

    def __enter__(self) -> "Snapshot":
        self._native = self._db._native.snapshot()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._native is not None:
            self._native.close()
            self._native = None

    def _source(self) -> Any:
        if self._native is None:
            raise Closed("the snapshot is not open (use it inside `with db.read() as snap:`)")
        return self._native

    def get(self, cls: Type[T], key: Any) -> Optional[T]:
        """The ``cls`` record at ``key`` in this snapshot, or None."""
        collection = self._db.collection(cls)
        return self._source().get(collection.name, collection._spec.native_key(key), collection._plan)

    def query(self, cls: Type[T], query: Query = None, *, offset: int = 0, limit: Optional[int] = None) -> Results[T]:
        """As :meth:`Collection.query`, in this snapshot."""
        return Results(self._db.collection(cls), _query_text(query), offset, limit, self._source())

    def count(self, cls: type, query: Query = None) -> int:
        """As :meth:`Collection.count`, in this snapshot."""
        return self._source().count(self._db.collection(cls).name, _query_text(query))


class Documents(Generic[T]):
    """Documents of one dataclass by str id (see :meth:`Database.documents`). Values follow
    JSON's model, so a class with a ``bytes`` field is refused (:class:`tessera.UnsupportedType`).
    Each value is checked against its declared field type as a record's is (see
    ``tessera._schema``): :class:`tessera.SchemaViolation` names the field otherwise, and
    nothing is written. Only the declared fields are stored."""

    def __init__(self, native: Any, cls: Type[T], name: Optional[str] = None, db: Optional[Database] = None) -> None:
        self._native = native
        self._db = db
        self.name = name or cls.__name__.lower()
        self._type = RecordType(cls)
        bytes_field = _bytes_field(self._type.shape, "")
        if bytes_field is not None:
            raise UnsupportedType(
                f"{cls.__name__}: field `{bytes_field}` is bytes, which documents do not store (JSON's model)",
                path=bytes_field,
                annotation=bytes,
            )
        self._checks = {name: (path, check) for name, path, check in self._type.checks}

    def _violation(self, id: str, error: WrongValue) -> SchemaViolation:
        name = self.name
        where = f", field `{error.path}`" if error.path else ""
        return SchemaViolation(
            f"documents {name!r}, document {id!r}{where}: {error.problem}", collection=name, key=id, path=error.path, problem=error.problem
        )

    def _build(self, id: str, stored: dict) -> T:
        """The document ``id`` built from its stored fields: :class:`tessera.SchemaMismatch`
        naming the field for a stored value that is not of the field's type, or a field
        without a default that is not stored (a document written by another class)."""
        try:
            built = self._type.from_stored(stored)
            self._type.check_fields(built)
        except WrongValue as error:
            where = f", field `{error.path}`" if error.path else ""
            message = f"documents {self.name!r}, document {id!r}{where}: {error.problem}"
            raise SchemaMismatch(message, collection=self.name, key=id, path=error.path, reason=error.problem) from None
        return built

    def get(self, id: str) -> Optional[T]:
        """The document ``id``, or None; :class:`tessera.SchemaMismatch` naming the field for
        a stored value the class does not take."""
        stored = self._native.get(id)
        return None if stored is None else self._build(id, stored)

    def set(self, id: str, obj: T) -> None:
        """Stores ``obj`` (an instance of exactly the class) as the document ``id``, replacing
        every field."""
        _refuse_in_write_block(self._db, f"documents {self.name!r}: set of {id!r}")
        try:
            values = self._type.to_stored(obj)
            _refuse_non_finite(values, "")
        except WrongValue as error:
            raise self._violation(id, error) from None
        self._native.set(id, values)

    def update_field(self, id: str, field: str, value: Any) -> None:
        """Writes one field of the document ``id``; the others stay as they are."""
        _refuse_in_write_block(self._db, f"documents {self.name!r}: update_field of {id!r}")
        found = self._checks.get(field)
        if found is None:
            raise SchemaViolation(f"{self._type.cls.__name__} has no field `{field}`", path=field, key=id, problem="unknown field")
        path, check = found
        try:
            stored = check(value, path)
            _refuse_non_finite(stored, path)
        except WrongValue as error:
            raise self._violation(id, error) from None
        self._native.update_field(id, field, stored)

    def delete(self, id: str) -> bool:
        """Deletes the document ``id``: whether it existed."""
        _refuse_in_write_block(self._db, f"documents {self.name!r}: delete of {id!r}")
        return self._native.delete(id)

    def ids(self, prefix: str = "") -> List[str]:
        """Ids starting with ``prefix``, in order."""
        return self._native.ids(prefix)

    def observe(self, id: str) -> Subscription[Optional[T]]:
        """A live document: :class:`Initial` (``result`` the document or None), then
        :class:`Changed` per commit that changes it (``result`` the new value), then
        :class:`ClosedEvent`."""
        return _DocumentSubscription(self._native.observe(id), lambda stored: self._build(id, stored))


def _refuse_in_write_block(db: Optional[Database], what: str) -> None:
    """:class:`tessera.Error` when a write block (``with db.write()``) is open on this thread
    or task: documents and dictionaries are not part of one, so ``what`` would be written at
    once, and an exception in the block would not take it back."""
    if db is not None and db._transaction() is not None:
        raise Error(
            f"{what} inside `with db.write()`: documents and dictionaries are not part of a write block "
            "(it would be written at once, and not rolled back with the block); write it outside the block"
        )


def _refuse_non_finite(value: Any, path: str) -> None:
    """:class:`WrongValue` naming the path of a NaN or an infinity in a document's stored
    ``value`` (``path`` is where it is): JSON has neither, and one stored would read back as
    None."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise WrongValue(path, f"{value!r} cannot be stored in a document (JSON has no NaN or infinity)")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_non_finite(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_non_finite(item, f"{path}[{index}]")


def _bytes_field(shape: Any, path: str) -> Optional[str]:
    """The path of a ``Bytes`` field in a stored shape, or None."""
    if shape == "Bytes":
        return path or "(value)"
    if isinstance(shape, dict):
        ((kind, inner),) = shape.items()
        if kind == "Struct":
            for name, field in inner:
                found = _bytes_field(field, f"{path}.{name}" if path else name)
                if found is not None:
                    return found
        elif kind == "Enum":
            for name, payload in inner:
                if payload is not None:
                    found = _bytes_field(payload, path)
                    if found is not None:
                        return found
        elif kind == "List":
            return _bytes_field(inner, f"{path}[]")
        elif kind == "Tuple":
            for index, element in enumerate(inner):
                found = _bytes_field(element, f"{path}[{index}]")
                if found is not None:
                    return found
        elif kind in ("Option", "Map"):
            return _bytes_field(inner, path)
    return None


class _DocumentSubscription(Subscription):
    def _event(self, raw: Optional[tuple]) -> Any:
        if raw is None:
            return None
        kind, value = raw
        if kind == "closed":
            self._done = True
            return ClosedEvent(value)
        built = None if value is None else self._build(value)
        if kind == "initial":
            return Initial(built)
        return Changed(built, [], [], [], [], None)


class Dictionary(MutableMapping):
    """A persisted mapping of str keys to JSON-like values (None, bool, int, float, str,
    bytes, list, dict). Writes go to memory at once and to the file in the background;
    :meth:`flush` writes them now."""

    def __init__(self, native: Any, db: Optional[Database] = None) -> None:
        self._native = native
        self._db = db

    @property
    def name(self) -> str:
        """The dictionary's name."""
        return self._native.name

    def __getitem__(self, key: str) -> Any:
        value = self._native.get(key)
        if value is None and not self._native.contains(key):
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """The value at ``key``, or ``default``."""
        value = self._native.get(key)
        if value is None and not self._native.contains(key):
            return default
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        _refuse_in_write_block(self._db, f"dictionary {self.name!r}: a set of {key!r}")
        self._native.set(key, value)

    def __delitem__(self, key: str) -> None:
        _refuse_in_write_block(self._db, f"dictionary {self.name!r}: a removal of {key!r}")
        if not self._native.contains(key):
            raise KeyError(key)
        self._native.remove(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._native.contains(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._native.keys())

    def __len__(self) -> int:
        return len(self._native.keys())

    def clear(self) -> None:
        """Removes every key."""
        _refuse_in_write_block(self._db, f"dictionary {self.name!r}: clear")
        self._native.clear()

    def flush(self) -> None:
        """Writes every pending change to the file (the GIL is released meanwhile)."""
        self._native.flush()

    def __repr__(self) -> str:
        return f"tessera.Dictionary({self.name!r})"
