"""Live subscriptions: blocking and asyncio iteration, object subscriptions, Closed."""

from __future__ import annotations

import asyncio
import threading

import tessera
from conftest import Task


def test_initial_changed_closed(tmp_path):
    db = tessera.open(tmp_path / "l.tessera")
    tasks = db.collection(Task)
    tasks.insert(Task(1, "a", 5))
    live = tasks.subscribe("priority > 2")
    first = next(live)
    assert isinstance(first, tessera.Initial) and first.result == [Task(1, "a", 5)]
    tasks.insert(Task(2, "b", 9))
    change = next(live)
    assert isinstance(change, tessera.Changed)
    assert change.insertions == [1] and change.inserted == [Task(2, "b", 9)]
    tasks.upsert(Task(1, "a!", 5))
    change = next(live)
    assert change.modifications == [0] and change.updated[0].title == "a!"
    tasks.delete(2)
    change = next(live)
    assert change.deletions == [1] and change.result == [Task(1, "a!", 5)]
    assert live.next(timeout=0.05) is None, "no event: a timeout"
    del tasks
    db.close()
    event = live.next(timeout=10)
    assert isinstance(event, tessera.ClosedEvent)
    assert list(live) == []


def test_subscribe_object(db, tasks):
    live = tasks.subscribe_object(7)
    first = next(live)
    assert isinstance(first, tessera.Initial) and first.result is None, "absent at first"
    tasks.insert(Task(8, "other", 1))
    tasks.insert(Task(7, "mine", 1))
    change = next(live)
    assert change == tessera.Updated(Task(7, "mine", 1)), "only its own key's writes, as the record"
    tasks.upsert(Task(7, "mine!", 2))
    assert next(live) == tessera.Updated(Task(7, "mine!", 2))
    tasks.delete(7)
    assert isinstance(next(live), tessera.Deleted)
    tasks.insert(Task(7, "again", 3))
    assert next(live) == tessera.Updated(Task(7, "again", 3)), "followed through delete and insert again"
    assert live.next(timeout=0.05) is None, "one event per commit"


def test_subscribe_object_initial_holds_the_stored_record(db, tasks):
    tasks.insert(Task(3, "here", 4))
    live = tasks.subscribe_object(3)
    assert next(live) == tessera.Initial(Task(3, "here", 4))


def test_async_for(db, tasks):
    async def main() -> list:
        live = tasks.subscribe()
        events = []
        async for event in live:
            events.append(event)
            if len(events) == 1:
                threading.Thread(target=tasks.insert, args=(Task(1, "x", 1),)).start()
            if len(events) == 2:
                break
        return events

    events = asyncio.run(main())
    assert isinstance(events[0], tessera.Initial)
    assert isinstance(events[1], tessera.Changed) and events[1].inserted == [Task(1, "x", 1)]
