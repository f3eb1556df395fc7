"""Collections from dataclasses: schema, writes, reads, queries, transactions, snapshots."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from typing import Any, List, Optional, Set, Union

import pytest

import tessera
from tessera import C

from conftest import Address, Level, Person, Task


def person(name: str = "ada", age: int = 36) -> Person:
    return Person(
        name=name,
        age=age,
        score=9.5,
        active=True,
        avatar=b"\x00\x01",
        address=Address("London"),
        tags=["math", "engines"],
        level=Level.High,
        born=datetime.datetime(1815, 12, 10, 8, 30),
        extra={"cards": 3},
    )


def test_open_is_a_context_manager(tmp_path):
    with tessera.open(tmp_path / "a.tessera", durability="buffered") as db:
        assert not db.closed
    assert db.closed


def test_every_supported_type_round_trips(db):
    people = db.collection(Person)
    ada = person()
    people.insert(ada)
    assert people.get("ada") == ada
    assert people["ada"].address.city == "London"
    assert people.get("nobody") is None
    with pytest.raises(tessera.NotFound):
        people["nobody"]


def test_insert_upsert_delete_patch(tasks):
    tasks.insert(Task(1, "one", 5))
    with pytest.raises(tessera.DuplicateKey) as error:
        tasks.insert(Task(1, "again", 5))
    assert error.value.collection == "task" and error.value.key == "1"
    assert tasks.upsert(Task(1, "one", 6)) == "updated"
    assert tasks.upsert(Task(1, "one", 6)) == "unchanged"
    assert tasks.upsert(Task(2, "two", 1)) == "inserted"
    assert tasks.patch(2, title="TWO").title == "TWO"
    assert tasks.get(2).title == "TWO"
    with pytest.raises(tessera.NotFound):
        tasks.patch(99, title="x")
    assert tasks.delete(2) is True
    assert tasks.delete(2) is False
    assert len(tasks) == 1 and 1 in tasks and 2 not in tasks


def test_unique_violation_names_the_index(tasks):
    tasks.insert(Task(1, "one", 5, email="a@x"))
    with pytest.raises(tessera.UniqueViolation) as error:
        tasks.insert(Task(2, "two", 5, email="a@x"))
    assert error.value.index == "email"
    assert error.value.collection == "task"
    assert tasks.get(2) is None, "nothing written"


def test_wrong_type_at_insert_names_the_field_and_writes_nothing(db, tasks):
    with pytest.raises(tessera.SchemaViolation) as error:
        tasks.insert(Task(1, "one", "high"))  # type: ignore[arg-type]
    assert error.value.path == "priority"
    assert error.value.collection == "task"
    assert tasks.count() == 0
    people = db.collection(Person)
    bad = person()
    bad.address = Address(7)  # type: ignore[arg-type]
    with pytest.raises(tessera.SchemaViolation) as error:
        people.insert(bad)
    assert error.value.path == "address.city"
    bad = person()
    bad.tags = ["ok", 3]  # type: ignore[list-item]
    with pytest.raises(tessera.SchemaViolation) as error:
        people.insert(bad)
    assert error.value.path == "tags[1]"
    assert people.count() == 0


def test_unsupported_field_type_fails_at_decoration_with_the_field_name():
    with pytest.raises(tessera.UnsupportedType) as error:

        @tessera.record(key="id")
        @dataclasses.dataclass
        class Bad:
            id: int
            members: Set[int]

    assert error.value.path == "members"
    with pytest.raises(tessera.UnsupportedType) as error:

        @tessera.record(key="id")
        @dataclasses.dataclass
        class BadKey:
            id: List[int]

    assert error.value.path == "id"


def test_queries_text_and_builder(tasks):
    tasks.insert_many([Task(i, f"task {i}", i % 5) for i in range(20)])
    assert [t.id for t in tasks.query("priority == 4")] == [4, 9, 14, 19]
    assert [t.id for t in tasks.query(C.priority == 4, limit=2)] == [4, 9]
    assert [t.id for t in tasks.query(C.priority == 4, offset=3)] == [19]
    assert tasks.count((C.priority > 2) & (C.id < 10)) == 4
    assert tasks.count(~(C.priority > 2) | C.title.starts_with("task 1")) == 12 + 11 - 7
    assert tasks.count(C.priority.isin([0, 1])) == 8
    assert tasks.count(C.email == None) == 20  # noqa: E711
    results = tasks.query("priority >= 3")
    assert results.count() == 8
    assert "priority >= 3" in results.explain()
    assert "priority" in tasks.explain("priority > 1")
    assert results.first().id == 3
    assert [t.id for t in tasks][:3] == [0, 1, 2]


def test_query_results_are_lazy_iterators(tasks):
    tasks.insert_many([Task(i, "t", 1) for i in range(5)])
    iterator = iter(tasks.query())
    assert next(iterator).id == 0
    assert next(iterator).id == 1


def test_query_syntax_error_has_the_column(tasks):
    with pytest.raises(tessera.QuerySyntaxError) as error:
        tasks.query("priority >").count()
    assert error.value.column == 11
    with pytest.raises(tessera.QueryError):
        tasks.count("nosuchfield > 1")
    with pytest.raises(tessera.QueryError):
        tasks.count('priority > "x"')


def test_enum_and_nested_queries(db):
    people = db.collection(Person)
    people.insert(person("ada"))
    low = person("bob")
    low.level = Level.Low
    low.address = Address("Paris")
    people.insert(low)
    assert [p.name for p in people.query(C.level == Level.Low)] == ["bob"]
    assert [p.name for p in people.query(C.address.city == "London")] == ["ada"]


def test_write_transaction_commits_together(db, tasks):
    with db.write() as tx:
        tasks.insert(Task(1, "a", 1))
        tx.insert(Task(2, "b", 2))
        assert tasks.get(1).title == "a", "the block sees its own writes"
        assert tx.get(Task, 2).title == "b"
        tx.delete(Task, 1)
        assert tasks.get(1) is None
        with db.read() as snap:
            assert snap.get(Task, 2) is None, "not committed yet"
    assert tasks.get(1) is None and tasks.get(2).title == "b"


def test_exception_in_write_rolls_back_and_propagates_unchanged(db, tasks):
    class Mine(Exception):
        pass

    mine = Mine("stop")
    with pytest.raises(Mine) as error:
        with db.write():
            tasks.insert(Task(1, "a", 1))
            raise mine
    assert error.value is mine
    assert tasks.count() == 0


def test_failed_commit_writes_nothing(db, tasks):
    tasks.insert(Task(1, "a", 1))
    with pytest.raises(tessera.DuplicateKey):
        with db.write():
            tasks.insert(Task(2, "b", 1))
            tasks.upsert(Task(3, "c", 1))
            tasks.insert(Task(1, "dup", 1))
    assert tasks.count() == 1


def test_transactions_do_not_nest(db):
    with db.write():
        with pytest.raises(tessera.Error):
            with db.write():
                pass


def test_snapshot_sees_one_state(db, tasks):
    tasks.insert(Task(1, "a", 1))
    with db.read() as snap:
        tasks.insert(Task(2, "b", 1))
        assert snap.count(Task) == 1
        assert [t.id for t in snap.query(Task)] == [1]
        assert snap.get(Task, 2) is None
    assert tasks.count() == 2
    with pytest.raises(tessera.Closed):
        snap.get(Task, 1)


def test_closed_database_refuses_writes(tmp_path):
    db = tessera.open(tmp_path / "c.tessera")
    tasks = db.collection(Task)
    db.close()
    with pytest.raises(tessera.Closed):
        tasks.insert(Task(1, "a", 1))
    with pytest.raises(tessera.Closed):
        tasks.get(1)
    with pytest.raises(tessera.Closed):
        with db.write():
            pass
    db.close()  # twice is fine


def test_not_a_database(tmp_path):
    path = tmp_path / "text.tessera"
    path.write_bytes(b"this is not an LMDB file at all" * 200)
    with pytest.raises(tessera.NotADatabase) as error:
        tessera.open(path)
    assert str(path) in error.value.path
    assert path.read_bytes().startswith(b"this is not"), "nothing written"


def test_collection_constructed_directly_creates_the_collection_and_is_the_one_db_collection_returns(tmp_path):
    """``tessera.Collection(db, Task)``, not through ``db.collection``: it creates the
    collection with the dataclass's schema, reads and writes it, and is the handle the
    database gives for the class afterwards."""
    path = tmp_path / "direct.tessera"
    with tessera.open(path) as db:
        assert db.collection_names() == []
        tasks = tessera.Collection(db, Task)
        assert isinstance(tasks, tessera.Collection) and tasks.name == "task"
        assert db.collection_names() == ["task"]
        tasks.insert(Task(1, "direct", 7, email="d@x"))
        assert tasks.get(1) == Task(1, "direct", 7, email="d@x")
        assert [t.id for t in tasks.query("priority > 5")] == [1]
        assert db.collection(Task) is tasks
        with pytest.raises(tessera.UniqueViolation):
            tasks.insert(Task(2, "other", 1, email="d@x"))  # the schema's unique index is stored
        with pytest.raises(TypeError):
            tessera.Collection(db, Address)  # not a record type
    with tessera.open(path) as db:
        again = tessera.Collection[Task](db, Task)
        assert again.get(1) == Task(1, "direct", 7, email="d@x")
        assert again.explain("priority > 5").startswith("index range on priority"), "the index on priority was stored"


def test_reopen_keeps_records_and_schema(tmp_path):
    with tessera.open(tmp_path / "r.tessera") as db:
        db.collection(Task).insert(Task(1, "a", 1))
    with tessera.open(tmp_path / "r.tessera") as db:
        assert db.collection(Task).get(1) == Task(1, "a", 1)
        assert db.collection_names() == ["task"]


def test_composite_key(db):
    @tessera.record(key=("day", "name"))
    @dataclasses.dataclass
    class Event:
        day: int
        name: str
        note: str

    events = db.collection(Event)
    events.insert(Event(3, "launch", "go"))
    assert events.get((3, "launch")).note == "go"
    assert events.delete((3, "launch"))
    assert events.get((3, "launch")) is None


def test_get_many(tasks):
    tasks.insert_many([Task(i, "t", 1) for i in range(3)])
    assert [t and t.id for t in tasks.get_many([0, 5, 2])] == [0, None, 2]


def test_gil_is_released_during_commits_and_waits(db, tasks):
    """A thread waiting on a subscription (GIL released) lets another thread commit, and two
    writer threads both make progress."""
    live = tasks.subscribe()
    assert isinstance(next(live), tessera.Initial)
    seen: List[Any] = []

    def wait() -> None:
        seen.append(live.next(timeout=10))

    waiter = threading.Thread(target=wait)
    waiter.start()
    counts = [0, 0]

    def write(slot: int) -> None:
        for i in range(50):
            tasks.insert(Task(slot * 1000 + i, "t", 1))
            counts[slot] += 1

    writers = [threading.Thread(target=write, args=(slot,)) for slot in (0, 1)]
    for thread in writers:
        thread.start()
    for thread in writers + [waiter]:
        thread.join(timeout=30)
    assert counts == [50, 50]
    assert isinstance(seen[0], tessera.Changed)
    assert tasks.count() == 100


def test_gil_released_while_one_thread_waits_forever(db, tasks):
    """While one thread blocks in a subscription wait without a timeout, the main thread runs
    Python code and commits."""
    live = tasks.subscribe("priority > 100")
    next(live)
    results: List[Any] = []
    waiter = threading.Thread(target=lambda: results.append(live.next()))
    waiter.start()
    total = sum(range(200_000))  # pure Python work needs the GIL
    tasks.insert(Task(1, "big", 500))
    waiter.join(timeout=10)
    assert total > 0 and isinstance(results[0], tessera.Changed)
    assert results[0].inserted == [Task(1, "big", 500)]


def test_union_of_dataclasses_is_an_enum_with_payloads(db):
    posts = db.collection(Post)
    posts.insert_many([Post(1, Text("hi")), Post(2, Image(["a.png"])), Post(3, None)])
    assert posts.get(1).content == Text("hi")
    assert posts.get(2).content == Image(["a.png"])
    assert posts.get(3).content is None
    assert [p.id for p in posts.query("content is Image")] == [2]


@dataclasses.dataclass
class Text:
    text: str


@dataclasses.dataclass
class Image:
    images: List[str]


@tessera.record(key="id")
@dataclasses.dataclass
class Post:
    id: int
    content: Optional[Union[Text, Image]]


def test_transaction_reads_nested_pending_records_twice(db):
    people = db.collection(Person)
    with db.write():
        ada = person()
        people.insert(ada)
        ada.tags.append("changed after the insert")
        assert people.get("ada").level is Level.High
        assert people.get("ada").level is Level.High, "a second read decodes again"
    assert people.get("ada").tags == ["math", "engines"], "the queued value was copied"


def test_unstorable_value_in_a_transaction_fails_at_the_call(db, tasks):
    with pytest.raises(tessera.SchemaViolation) as error:
        with db.write():
            tasks.insert(Task(1, "a", 1, email=object()))  # type: ignore[arg-type]
    assert error.value.path == "email"
    assert tasks.count() == 0


def test_read_only_open_refuses_writes(tmp_path):
    path = tmp_path / "ro.tessera"
    with tessera.open(path) as db:
        db.collection(Task).insert(Task(1, "a", 1))
    with tessera.open(path, read_only=True) as db:
        tasks = db.collection(Task)
        assert tasks.get(1).title == "a"
        with pytest.raises(tessera.ReadOnly):
            tasks.insert(Task(2, "b", 1))


def test_full_database_is_typed(tmp_path):
    with tessera.open(tmp_path / "full.tessera", map_size_max_bytes=8 << 20) as db:
        tasks = db.collection(Task)
        with pytest.raises(tessera.Full):
            tasks.insert_many([Task(i, "x" * 2000, 1) for i in range(20_000)])
        assert tasks.count() == 0, "nothing written"


def test_order_by(tasks):
    tasks.insert_many([Task(i, f"t{9 - i}", i % 3, email=None if i % 2 else f"{i}@x") for i in range(10)])
    assert [t.title for t in tasks.query("priority > 0", order_by="title", limit=3)] == ["t1", "t2", "t4"]
    assert [t.id for t in tasks.query(order_by=["-priority", "id"], offset=1, limit=3)] == [5, 8, 1]
    # SQL's rule for None: last ascending, first descending (ties by key).
    assert [t.id for t in tasks.query(order_by="email", limit=2)] == [0, 2], "None last"
    assert [t.id for t in tasks.query(order_by="-email", limit=2)] == [1, 3], "None first"
    # The query text may carry the order itself.
    assert [t.id for t in tasks.query("priority > 0 order by priority desc, id", limit=2)] == [2, 5]


def test_first_keeps_the_order(tasks):
    tasks.insert_many([Task(i, f"t{i}", i) for i in range(5)])
    assert tasks.query(order_by="-priority").first().id == 4
    assert tasks.query("priority > 10").first() is None
