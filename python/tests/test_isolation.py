"""Write blocks are serializable: what a ``with db.write()`` block read is checked again when it
commits, and a change by another writer in between makes the commit write nothing and raise
``tessera.TransactionConflict`` (no lost updates)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

import tessera

from conftest import Task


def _elsewhere(work) -> None:
    """Runs ``work`` on another thread (so it commits on its own, outside this thread's block)."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def test_a_read_changed_by_another_writer_fails_the_commit_and_writes_nothing(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "count", 0))
    with pytest.raises(tessera.TransactionConflict) as raised:
        with db.write():
            current = tasks.get(1)
            _elsewhere(lambda: tasks.upsert(Task(1, "count", 5)))
            tasks.upsert(dataclasses.replace(current, priority=current.priority + 1))
            tasks.insert(Task(2, "other", 0))
    assert raised.value.collection == tasks.name
    assert raised.value.read == "get"
    assert tasks.get(1).priority == 5, "the other writer's update is not lost"
    assert tasks.get(2) is None, "nothing of the refused block is written"


def test_an_absent_key_that_appears_is_a_conflict(db):
    tasks = db.collection(Task)
    with pytest.raises(tessera.TransactionConflict):
        with db.write():
            assert tasks.get(7) is None
            _elsewhere(lambda: tasks.insert(Task(7, "raced", 1)))
            tasks.upsert(Task(8, "depends on 7 being absent", 1))
    assert tasks.get(8) is None


def test_a_query_whose_matches_change_is_a_conflict(db):
    tasks = db.collection(Task)
    tasks.insert_many([Task(1, "a", 10), Task(2, "b", 1)])
    with pytest.raises(tessera.TransactionConflict) as raised:
        with db.write():
            busy = list(tasks.query("priority > 5"))
            assert [task.id for task in busy] == [1]
            _elsewhere(lambda: tasks.upsert(Task(2, "b", 9)))  # now matches too
            tasks.upsert(Task(3, "summary", len(busy)))
    assert raised.value.read == "query"
    assert tasks.get(3) is None


def test_a_count_that_changes_is_a_conflict(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "a", 1))
    with pytest.raises(tessera.TransactionConflict) as raised:
        with db.write():
            total = tasks.count()
            _elsewhere(lambda: tasks.insert(Task(2, "b", 1)))
            tasks.upsert(Task(100, "total", total))
    assert raised.value.read == "count"


def test_writes_elsewhere_that_the_block_did_not_read_do_not_conflict(db):
    tasks = db.collection(Task)
    tasks.insert_many([Task(1, "a", 1), Task(2, "b", 1)])
    with db.write():
        first = tasks.get(1)
        _elsewhere(lambda: tasks.upsert(Task(2, "b", 50)))
        tasks.upsert(dataclasses.replace(first, priority=2))
    assert (tasks.get(1).priority, tasks.get(2).priority) == (2, 50)


def test_reads_of_different_snapshots_are_all_checked(db):
    """A commit between two reads of a block: the reads saw different snapshots, so the commit
    checks every one of them (none may be skipped as unchanged)."""
    tasks = db.collection(Task)
    tasks.insert_many([Task(1, "a", 1), Task(2, "b", 1)])
    with db.write():
        first = tasks.get(1)
        _elsewhere(lambda: tasks.upsert(Task(2, "b", 50)))
        second = tasks.get(2)  # sees the other writer's commit: still what is stored
        tasks.upsert(dataclasses.replace(first, priority=first.priority + second.priority))
    assert tasks.get(1).priority == 51
    with pytest.raises(tessera.TransactionConflict):
        with db.write():
            first = tasks.get(1)
            _elsewhere(lambda: tasks.upsert(Task(1, "a", 0)))  # changes the first read
            second = tasks.get(2)  # the last read saw the last commit: the first is checked still
            tasks.upsert(dataclasses.replace(first, priority=first.priority + second.priority))
    assert tasks.get(1).priority == 0


def test_a_commit_right_after_the_reads_snapshot_commits_without_reading_again(db):
    """Nothing committed since the block's reads: the commit goes through, and what the block
    read and wrote is what is stored."""
    tasks = db.collection(Task)
    tasks.insert_many([Task(i, "t", i) for i in range(1, 6)])
    with db.write():
        total = sum(task.priority for task in tasks.query("priority > 0"))
        count = tasks.count()
        for key in range(1, 6):
            current = tasks.get(key)
            tasks.upsert(dataclasses.replace(current, priority=current.priority * 10))
        tasks.upsert(Task(100, "total", total + count))
    assert [tasks.get(key).priority for key in range(1, 6)] == [10, 20, 30, 40, 50]
    assert tasks.get(100).priority == 20


def test_concurrent_increments_lose_no_update(db):
    tasks = db.collection(Task)
    tasks.insert(Task(1, "counter", 0))
    threads_count, increments = 4, 40
    conflicts = []

    def work() -> None:
        for _ in range(increments):
            while True:
                try:
                    with db.write():
                        current = tasks.get(1)
                        tasks.upsert(dataclasses.replace(current, priority=current.priority + 1))
                    break
                except tessera.TransactionConflict:
                    conflicts.append(1)

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tasks.get(1).priority == threads_count * increments, f"{len(conflicts)} conflicts retried"
