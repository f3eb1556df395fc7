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


def test_a_changed_event_is_the_dataclass_with_its_fields(db, tasks):
    import dataclasses

    import pytest

    tasks.insert_many([Task(1, "a", 1), Task(2, "b", 2), Task(3, "c", 3)])
    live = tasks.subscribe("priority > 0 order by priority")
    next(live)
    tasks.upsert(Task(1, "a", 9))  # moves to the end
    change = next(live)
    assert type(change) is tessera.Changed
    assert change.moves == [(0, 2)] and all(type(move) is tuple for move in change.moves)
    assert change.modifications == [2] and change.updated == [Task(1, "a", 9)]
    same = tessera.Changed(change.result, change.deletions, change.insertions, change.modifications, change.moves, change.sequence)
    assert change == same and repr(change) == repr(same)
    assert [field.name for field in dataclasses.fields(change)][-2:] == ["sequence", "resynced"]
    assert change.sequence > 0 and change.resynced is False
    assert dataclasses.replace(change, sequence=0).sequence == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.sequence = 1  # type: ignore[misc]


def test_events_held_keep_their_results_while_later_ones_are_dropped(db, tasks):
    live = tasks.subscribe("priority >= 0")
    held = [next(live)]
    expected = [[]]
    for round_ in range(12):
        # Several commits whose events are read and let go of before the next wait, and one
        # event kept: each kept result is what it was when delivered.
        for i in range(round_ * 10, round_ * 10 + 9):
            tasks.insert(Task(i, f"t{i}", i))
        dropped = [next(live) for _ in range(9)]
        assert [task.id for task in dropped[-1].result] == list(range(round_ * 10 + 9))
        del dropped
        tasks.insert(Task(round_ * 10 + 9, "kept", 0))
        held.append(next(live))
        expected.append(sorted(range(round_ * 10 + 10)))
    for event, ids in zip(held, expected):
        assert sorted(task.id for task in event.result) == ids
    assert held[-1].result[0] == Task(0, "t0", 0) and held[-1].result[9] == Task(9, "kept", 0)
