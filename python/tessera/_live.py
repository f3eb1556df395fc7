"""Live queries and live records from Python: events, and the blocking and asyncio iterators
over them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Callable, Generic, List, Optional, Tuple, TypeVar

T = TypeVar("T")

# How long one wait of the asyncio iterator blocks a worker thread, in seconds: the longest
# a cancelled `async for` keeps that thread.
ASYNC_WAIT_SLICE_SECONDS = 0.25


class Result(Sequence):
    """A live query's result: a sequence whose records are built when first read (an event
    costs what is read of it, not the size of the result). Equal to a list of the same
    records."""

    __slots__ = ("_rows", "_build", "_built")

    def __init__(self, rows: Any, build: Callable[[dict], Any]) -> None:
        self._rows = rows
        self._build = build
        self._built: dict = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        found = self._built.get(index)
        if found is None:
            if not 0 <= index < len(self):
                raise IndexError(index)
            found = self._built[index] = self._build(self._rows[index])
        return found

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Result)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))


@dataclasses.dataclass(frozen=True)
class Initial(Generic[T]):
    """The query's result when the subscription started."""

    result: Sequence  # of T: a Result, built as read


@dataclasses.dataclass(frozen=True)
class Changed(Generic[T]):
    """One commit's change to the result: indices as in Realm's changesets.

    ``deletions`` index the previous result; ``insertions`` and ``modifications`` the new
    one; ``moves`` are (previous index, new index) pairs; ``sequence`` is the commit."""

    result: Sequence  # of T: a Result, built as read
    deletions: List[int]
    insertions: List[int]
    modifications: List[int]
    moves: List[Tuple[int, int]]
    sequence: int

    @property
    def inserted(self) -> List[T]:
        """The records new to the result."""
        return [self.result[index] for index in self.insertions]

    @property
    def updated(self) -> List[T]:
        """The records that stayed and changed."""
        return [self.result[index] for index in self.modifications]


@dataclasses.dataclass(frozen=True)
class Closed:
    """The subscription ended (the database closed, or it could not follow a commit)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Updated(Generic[T]):
    """A live record's commit: the record as written (an insert, an update, or an insert
    again after a delete)."""

    value: Any  # T


@dataclasses.dataclass(frozen=True)
class Deleted:
    """A live record's commit: the record was deleted."""


Event = Any  # Initial[T] | Changed[T] | Closed, or for a live record Initial | Updated | Deleted | Closed

_object_new = object.__new__
_object_setattr = object.__setattr__


def _changed(result: Sequence, deletions: List[int], insertions: List[int], modifications: List[int], moves: List[Tuple[int, int]], sequence: int) -> Changed:
    """``Changed(result, ...)``, made without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): the same fields, equal to one made by calling the class,
    in half the time, on the path from a commit to the subscriber."""
    event = _object_new(Changed)
    _object_setattr(
        event,
        "__dict__",
        {"result": result, "deletions": deletions, "insertions": insertions, "modifications": modifications, "moves": moves, "sequence": sequence},
    )
    return event


class Subscription(Generic[T]):
    """A live query. Iterate it (``for event in sub``) to wait for events with the GIL
    released, or ``async for event in sub`` under asyncio. Iteration ends after ``Closed``."""

    def __init__(self, native: Any, build: Callable[[dict], T]) -> None:
        self._native = native
        self._build = build
        self._done = False

    def _event(self, raw: Optional[tuple]) -> Optional[Event]:
        if raw is None:
            return None
        build = self._build
        kind = raw[0]
        if kind == "changed":
            # `moves` comes as a list of (previous, new) tuples.
            _, rows, deletions, insertions, modifications, moves, sequence = raw
            return _changed(Result(rows, build), deletions, insertions, modifications, moves, sequence)
        if kind == "initial":
            return Initial(Result(raw[1], build))
        self._done = True
        return Closed(raw[1])

    def next(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, waiting at most ``timeout`` seconds (None: until one comes);
        None on timeout or once the subscription has ended."""
        if self._done:
            return None
        event = self._event(self._native.next(timeout))
        if event is None and timeout is None:
            self._done = True
        return event

    def __iter__(self) -> "Subscription[T]":
        return self

    def __next__(self) -> Event:
        # `next(None)`, inlined: one Python call less per event.
        if self._done:
            raise StopIteration
        event = self._event(self._native.next(None))
        if event is None:
            self._done = True
            raise StopIteration
        return event

    def __aiter__(self) -> "Subscription[T]":
        return self

    async def __anext__(self) -> Event:
        loop = asyncio.get_running_loop()
        while not self._done:
            raw = await loop.run_in_executor(None, self._native.next, ASYNC_WAIT_SLICE_SECONDS)
            event = self._event(raw)
            if event is not None:
                return event
        raise StopAsyncIteration


class ObjectSubscription(Subscription):
    """A live record: :class:`Initial` (``result`` the record, or None if absent), then
    :class:`Updated` per commit that writes it and :class:`Deleted` per commit that removes
    it, then :class:`Closed`. Iterate it as a :class:`Subscription`."""

    def _event(self, raw: Optional[tuple]) -> Optional[Event]:
        if raw is None:
            return None
        kind, value = raw
        if kind == "initial":
            return Initial(None if value is None else self._build(value))
        if kind == "updated":
            return Updated(self._build(value))
        if kind == "deleted":
            return Deleted()
        self._done = True
        return Closed(value)
