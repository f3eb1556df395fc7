"""A ``with db.write()`` block's queue and overlay, kept in the extension: read-your-writes
by stored key, duplicate inserts refused at the call, an exception discarding everything, and
a block that starts afresh each time it is entered."""

from __future__ import annotations

import dataclasses
import threading

import pytest

import tessera

from conftest import Task


@tessera.record(key="x")
@dataclasses.dataclass
class Point:
    x: float
    label: str


def test_a_get_in_the_block_sees_the_blocks_last_write_at_the_key(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "stored", 0))
    with db.write():
        assert tasks.get(1).title == "stored"
        tasks.upsert(Task(1, "first", 1))
        tasks.upsert(Task(1, "second", 2))
        assert tasks.get(1) == Task(1, "second", 2)
        tasks.delete(1)
        assert tasks.get(1) is None
        assert 1 not in tasks
        tasks.insert(Task(1, "again", 3))
        assert tasks[1] == Task(1, "again", 3)
        assert tasks.get(2) is None
    assert tasks.get(1) == Task(1, "again", 3)


def test_a_pending_record_is_a_copy_of_the_object_at_the_call(db):
    tasks = db.collection(Task)
    with db.write():
        task = Task(1, "as queued", 1)
        tasks.upsert(task)
        task.title = "changed later"
        seen = tasks.get(1)
        assert seen == Task(1, "as queued", 1)
        assert seen is not task
    assert tasks.get(1).title == "as queued"


def test_inserting_a_key_the_block_wrote_raises_at_the_call_and_writes_nothing(db):
    tasks = db.collection(Task)
    with pytest.raises(tessera.DuplicateKey) as raised:
        with db.write():
            tasks.insert(Task(7, "one", 0))
            tasks.insert(Task(7, "two", 0))
    assert raised.value.collection == tasks.name
    assert raised.value.key == "7"
    assert tasks.get(7) is None


def test_inserting_after_the_block_deleted_the_key_is_allowed(db):
    tasks = db.collection(Task)
    tasks.insert(Task(3, "old", 0))
    with db.write():
        tasks.delete(3)
        tasks.insert(Task(3, "new", 0))
    assert tasks.get(3).title == "new"


def test_an_exception_in_the_block_propagates_unchanged_and_writes_nothing(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "kept", 0))

    class Stop(Exception):
        pass

    stop = Stop("out")
    with pytest.raises(Stop) as raised:
        with db.write():
            tasks.upsert(Task(1, "lost", 1))
            tasks.insert(Task(2, "lost", 1))
            tasks.delete(1)
            raise stop
    assert raised.value is stop
    assert tasks.get(1).title == "kept"
    assert tasks.get(2) is None


def test_a_float_key_finds_the_pending_record_under_any_equal_spelling(db):
    points = db.collection(Point)
    with db.write():
        points.upsert(Point(-0.0, "zero"))
        points.upsert(Point(2, "two"))  # an int for a float key: stored as 2.0
        assert points.get(0.0).label == "zero"
        assert points.get(-0.0).label == "zero"
        assert points.get(0).label == "zero"
        assert points.get(2.0).label == "two"
    assert points.get(0.0).label == "zero"


def test_a_bool_key_for_an_int_key_is_refused_in_the_block_as_outside_it(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "one", 0))
    with pytest.raises(tessera.SchemaViolation):
        tasks.get(True)
    with db.write():
        tasks.upsert(Task(1, "pending", 0))
        # True == 1 in Python, but it is not an int key: not the pending record either.
        with pytest.raises(tessera.SchemaViolation):
            tasks.get(True)


def test_a_transaction_entered_again_starts_with_no_queue_and_no_reads(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "read", 0))
    block = db.write()
    with pytest.raises(RuntimeError):
        with block:
            tasks.get(1)
            tasks.upsert(Task(2, "discarded", 0))
            raise RuntimeError("abandon the first use")
    # Another writer changes what the abandoned block read: not the new block's concern.
    thread = threading.Thread(target=lambda: tasks.upsert(Task(1, "changed", 5)))
    thread.start()
    thread.join()
    with block:
        tasks.upsert(Task(3, "second use", 0))
    assert tasks.get(3).title == "second use"
    assert tasks.get(2) is None


def test_the_blocks_queue_refuses_writes_once_it_has_ended(db):
    tasks = db.collection(Task)
    with db.write() as tx:
        tasks.upsert(Task(1, "one", 0))
        native = tx._block
        assert len(native) == 1
    assert not native.active
    with pytest.raises(tessera.Error, match="ended"):
        native.upsert(tasks.name, tasks._encoder, Task(2, "late", 0))
    assert tasks.get(2) is None


@tessera.record(key="id", name="derived")
@dataclasses.dataclass
class Derived:
    id: int
    total: int

    def __getattribute__(self, name: str):
        # Reading `total` reads through the write block open on this thread (while the
        # extension encodes this record).
        if name == "total" and Derived.reads is not None:
            tasks = Derived.reads
            return sum(task.priority for task in (tasks.get(1), tasks.get(2)))
        return object.__getattribute__(self, name)

    reads = None


def test_an_attribute_that_reads_through_the_same_block_while_encoded_does_not_deadlock(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "base", 4))
    derived = db.collection(Derived)
    Derived.reads = tasks
    try:
        with db.write():
            tasks.upsert(Task(2, "pending", 6))
            derived.upsert(Derived(1, 0))
    finally:
        Derived.reads = None
    assert derived.get(1).total == 10


def test_a_delete_with_a_key_of_the_wrong_type_raises_at_the_call_and_the_block_goes_on(db):
    tasks = db.collection(Task)
    tasks.insert_many([Task(1, "one", 0), Task(2, "two", 0)])
    with db.write():
        with pytest.raises(tessera.SchemaViolation):
            tasks.delete("not an int")
        tasks.delete(1)
    assert tasks.get(1) is None and tasks.get(2) is not None
