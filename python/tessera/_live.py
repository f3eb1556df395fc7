"""Live queries and live records from Python: events, and the blocking and asyncio iterators
over them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any, Callable, Generic, List, Optional, Tuple, TypeVar

T = TypeVar("T")

# How long one wait of the asyncio iterator blocks a worker thread, in seconds: the longest
# a cancelled `async for` keeps that thread.
ASYNC_WAIT_SLICE_SECONDS = 0.25

# The threads the asyncio iterators wait on (the native wait releases the GIL). Their own
# pool, not the event loop's default executor: a wait may outlive the `await` that started it
# (a cancelled one), and its result must reach the next `await`, whatever loop runs it.
_ASYNC_WAITERS = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="tessera-async")


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
    one; ``moves`` are (previous index, new index) pairs; ``sequence`` is the commit (None for
    a document's change, which does not carry it).

    ``resynced``: the subscriber fell so far behind that the engine replaced its backlog with
    one change from the previous result to the new one, listing every previous row as deleted
    and every new row as inserted (applying it still gives the new result). Which records are
    new or changed is then unknown: :attr:`inserted` and :attr:`updated` raise ``ValueError``
    rather than name every record."""

    result: Sequence  # of T: a Result, built as read
    deletions: List[int]
    insertions: List[int]
    modifications: List[int]
    moves: List[Tuple[int, int]]
    sequence: Optional[int]
    resynced: bool = False

    def _refuse_if_resynced(self, what: str) -> None:
        if self.resynced:
            raise ValueError(f"{what} is unknown for a resynchronised change (the subscriber fell behind): compare the results")

    @property
    def inserted(self) -> List[T]:
        """The records new to the result (``ValueError`` if :attr:`resynced`)."""
        self._refuse_if_resynced("which records are new")
        return [self.result[index] for index in self.insertions]

    @property
    def updated(self) -> List[T]:
        """The records that stayed and changed (``ValueError`` if :attr:`resynced`)."""
        self._refuse_if_resynced("which records changed")
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


def _changed(
    result: Sequence,
    deletions: List[int],
    insertions: List[int],
    modifications: List[int],
    moves: List[Tuple[int, int]],
    sequence: Optional[int],
    resynced: bool = False,
) -> Changed:
    """``Changed(result, ...)``, made without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): the same fields, equal to one made by calling the class,
    in half the time, on the path from a commit to the subscriber."""
    event = _object_new(Changed)
    _object_setattr(
        event,
        "__dict__",
        {
            "result": result,
            "deletions": deletions,
            "insertions": insertions,
            "modifications": modifications,
            "moves": moves,
            "sequence": sequence,
            "resynced": resynced,
        },
    )
    return event


class Subscription(Generic[T]):
    """A live query. Iterate it (``for event in sub``) to wait for events with the GIL
    released, or ``async for event in sub`` under asyncio. Iteration ends after ``Closed``."""

    def __init__(self, native: Any, build: Callable[[dict], T]) -> None:
        self._native = native
        self._build = build
        self._done = False
        # The asyncio iterator's wait under way, if its `await` was cancelled: its event is the
        # next one, for whichever `await` comes next (see `__anext__`).
        self._waiting: Optional[concurrent.futures.Future] = None
        self._waiting_lock = threading.Lock()

    def _event(self, raw: Optional[tuple]) -> Optional[Event]:
        if raw is None:
            return None
        build = self._build
        kind = raw[0]
        if kind == "changed":
            # `moves` comes as a list of (previous, new) tuples.
            _, rows, deletions, insertions, modifications, moves, sequence, resynced = raw
            return _changed(Result(rows, build), deletions, insertions, modifications, moves, sequence, resynced)
        if kind == "initial":
            return Initial(Result(raw[1], build))
        self._done = True
        return Closed(raw[1])

    def next(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, waiting at most ``timeout`` seconds (None: until one comes);
        None on timeout or once the subscription has ended."""
        if isinstance(timeout, bool):
            raise TypeError("timeout is a number of seconds or None, not a bool")
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
        while not self._done:
            # A wait a cancelled `await` left under way is taken over: its event (or `Closed`)
            # is this one's, never lost with the cancelled call. Shielded, so that cancelling
            # this `await` leaves the wait to the next one in turn.
            with self._waiting_lock:
                waiting = self._waiting
                if waiting is None:
                    waiting = self._waiting = _ASYNC_WAITERS.submit(self._native.next, ASYNC_WAIT_SLICE_SECONDS)
            raw = await asyncio.shield(asyncio.wrap_future(waiting))
            with self._waiting_lock:
                if self._waiting is waiting:
                    self._waiting = None
                else:
                    continue  # another task took this wait's event
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
