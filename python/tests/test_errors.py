"""The exception hierarchy, and the fields each exception carries when it is raised for real."""

from __future__ import annotations

import dataclasses
import datetime
import pickle
import re
from pathlib import Path
from typing import Optional

import pytest

import tessera
from tessera import errors

from conftest import Task

SOURCES = Path(__file__).resolve().parent.parent / "src"


@tessera.record(key="name")
@dataclasses.dataclass
class Named:
    name: str
    note: str = ""


@tessera.record(key=("day", "slot"))
@dataclasses.dataclass
class Booking:
    day: int
    slot: str
    who: str = ""


@dataclasses.dataclass
class When:
    at: Optional[datetime.datetime] = None


@tessera.record(key="id")
@dataclasses.dataclass
class Event:
    id: int
    when: When = dataclasses.field(default_factory=When)


def test_every_exception_class_is_a_tessera_error_exported_by_the_package():
    assert set(errors.__all__) >= {"Error", "UniqueViolation", "NotFound", "Corrupted", "SchemaMismatch", "Full"}
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert isinstance(cls, type) and issubclass(cls, tessera.Error), name
        assert getattr(tessera, name) is cls, f"tessera.{name} is not tessera.errors.{name}"
    defined = {name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, tessera.Error)}
    assert defined == set(errors.__all__), "an exception class missing from errors.__all__"
    assert issubclass(tessera.Error, Exception)


@pytest.mark.parametrize(
    "cls, parents",
    [
        ("UniqueViolation", ("ConstraintError",)),
        ("DuplicateKey", ("ConstraintError",)),
        ("NotFound", ("Error", KeyError)),
        ("Corrupted", ("Error",)),
        ("NotADatabase", ("Error",)),
        ("SchemaMismatch", ("SchemaError",)),
        ("SchemaViolation", ("SchemaError",)),
        ("UnsupportedType", ("SchemaError", TypeError)),
        ("Full", ("Error",)),
        ("ReadOnly", ("Error",)),
        ("Closed", ("Error",)),
        ("TransactionConflict", ("Error",)),
        ("QuerySyntaxError", ("QueryError",)),
        ("InvalidName", ("Error", ValueError)),
        ("EncodeError", ("Error", TypeError)),
        ("JsonError", ("Error", ValueError)),
    ],
)
def test_exception_hierarchy_places_each_class_under_its_parent(cls, parents):
    for parent in parents:
        parent_class = getattr(errors, parent) if isinstance(parent, str) else parent
        assert issubclass(getattr(errors, cls), parent_class), f"{cls} is not a {parent_class.__name__}"


def test_every_class_the_extension_raises_by_name_is_in_the_hierarchy():
    """The extension picks each exception class by its name in ``tessera.errors``
    (``errors::raise(py, "Name", ...)``): a name that is not a class there would turn the
    error into an AttributeError."""
    source = "\n".join(path.read_text() for path in sorted(SOURCES.glob("*.rs")))
    named = set(re.findall(r'raise\(\s*py,\s*"(\w+)"', source))
    assert {"Corrupted", "Full", "NotFound", "UniqueViolation", "SchemaMismatch"} <= named, named
    for name in named:
        assert issubclass(getattr(errors, name), tessera.Error), name


def test_not_found_from_patch_and_indexing_carries_the_collection_and_the_key_as_other_errors_show_it(db):
    people = db.collection(Named)
    people.insert(Named("ada"))
    with pytest.raises(tessera.DuplicateKey) as duplicate:
        people.insert(Named("ada"))
    with pytest.raises(tessera.NotFound) as missing:
        people.patch("bob", note="x")
    assert missing.value.collection == "named"
    # The same text for a key as DuplicateKey (and UniqueViolation) give: JSON.
    assert duplicate.value.key == '"ada"' and missing.value.key == '"bob"'
    with pytest.raises(KeyError) as missing:  # NotFound is a KeyError, for `coll[key]`
        people["carol"]
    assert isinstance(missing.value, tessera.NotFound) and missing.value.key == '"carol"'
    assert "carol" in str(missing.value) and not str(missing.value).startswith("'"), "KeyError's quoting"
    assert people.get("bob") is None, "the failed patch wrote nothing"

    tasks = db.collection(Task)
    with pytest.raises(tessera.NotFound) as missing:
        tasks.patch(99, title="x")
    assert (missing.value.collection, missing.value.key) == ("task", "99")

    bookings = db.collection(Booking)
    bookings.insert(Booking(3, "am"))
    with pytest.raises(tessera.DuplicateKey) as duplicate:
        bookings.insert(Booking(3, "am"))
    with pytest.raises(tessera.NotFound) as missing:
        bookings.patch((3, "pm"), who="x")
    assert duplicate.value.key == '[3, "am"]' and missing.value.key == '[3, "pm"]'


def test_unique_violation_carries_collection_index_key_and_holder_and_writes_nothing(db, tasks):
    tasks.insert(Task(1, "one", 5, email="a@x"))
    with pytest.raises(tessera.UniqueViolation) as error:
        tasks.insert(Task(2, "two", 5, email="a@x"))
    assert (error.value.collection, error.value.index, error.value.key, error.value.holder) == ("task", "email", "2", "1")
    with pytest.raises(tessera.UniqueViolation) as error:
        with db.write():
            tasks.insert(Task(3, "three", 5))
            tasks.insert(Task(4, "four", 5, email="a@x"))
    assert (error.value.collection, error.value.index, error.value.key, error.value.holder) == ("task", "email", "4", "1")
    assert [t.id for t in tasks.query()] == [1], "nothing of the block was written"


def test_schema_mismatch_carries_collection_key_and_the_nested_field_path_of_a_stored_record(db):
    events = db.collection(Event)
    events.insert(Event(1, When(datetime.datetime(2024, 1, 2))))
    # Another program stored a str that is no date in the nested datetime field.
    db._native.commit([("upsert", "event", {"id": 2, "when": {"at": "not a date"}})])
    with pytest.raises(tessera.SchemaMismatch) as error:
        events.get(2)
    assert (error.value.collection, error.value.key, error.value.path) == ("event", "2", "when.at")
    with pytest.raises(tessera.SchemaMismatch) as error:
        list(events.query())
    assert (error.value.collection, error.value.key, error.value.path) == ("event", "2", "when.at")
    assert events.get(1).when.at == datetime.datetime(2024, 1, 2)


def test_schema_mismatch_with_the_stored_schema_carries_the_collection_and_the_reason(db, tasks):
    @tessera.record(key="id", name="task")
    @dataclasses.dataclass
    class Other:
        id: int
        body: str

    with pytest.raises(tessera.SchemaMismatch) as error:
        db.collection(Other)
    assert error.value.collection == "task"
    assert "body" in error.value.reason and "title" in error.value.reason, error.value.reason
    with pytest.raises(tessera.SchemaMismatch) as error:
        db._native.create_collection("broken", "{not json")
    assert error.value.collection == "broken" and "does not read" in error.value.reason
    assert "broken" not in db.collection_names()


def test_full_carries_the_configured_ceiling_and_writes_nothing(tmp_path):
    ceiling = 8 << 20
    with tessera.open(tmp_path / "full.tessera", map_size_max_bytes=ceiling) as db:
        tasks = db.collection(Task)
        with pytest.raises(tessera.Full) as error:
            tasks.insert_many([Task(i, "x" * 2000, 1) for i in range(20_000)])
        assert error.value.ceiling_bytes == ceiling
        assert str(ceiling) in str(error.value)
        assert tasks.count() == 0, "nothing written"


def test_a_damaged_record_in_the_database_file_raises_corrupted(tmp_path):
    path = tmp_path / "damaged.tessera"
    marker = b"MARKER-of-the-damaged-record"
    with tessera.open(path) as db:
        tasks = db.collection(Task)
        tasks.insert_many([Task(i, f"ordinary {i}", 1) for i in range(100)])
        tasks.insert(Task(1000, marker.decode(), 1))
    data = bytearray(path.read_bytes())
    assert data.count(marker) >= 1, "the record's text is stored as it is"
    # Damage every copy of the record's text in the file (one bit of its first byte).
    at = data.find(marker)
    while at >= 0:
        data[at] ^= 0x20
        at = data.find(marker, at + 1)
    path.write_bytes(bytes(data))
    with tessera.open(path) as db:
        tasks = db.collection(Task)
        assert tasks.get(5) == Task(5, "ordinary 5", 1), "the other records still read"
        with pytest.raises(tessera.Corrupted) as error:
            tasks.get(1000)
        assert "checksum" in str(error.value)
        with pytest.raises(tessera.Corrupted):
            list(tasks.query())
        with pytest.raises(tessera.Corrupted):
            tasks.patch(1000, title="x")


def test_a_damaged_file_header_raises_not_a_database_with_the_path_and_changes_nothing(tmp_path):
    path = tmp_path / "header.tessera"
    with tessera.open(path) as db:
        db.collection(Task).insert(Task(1, "a", 1))
    data = bytearray(path.read_bytes())
    data[:64] = b"\xff" * 64  # the first meta page's header
    path.write_bytes(bytes(data))
    with pytest.raises(tessera.NotADatabase) as error:
        tessera.open(path)
    assert error.value.path == str(path)
    assert path.read_bytes() == bytes(data), "the refused open wrote nothing"


def test_raised_errors_pickle_with_their_class_and_fields(tasks):
    tasks.insert(Task(1, "one", 5, email="a@x"))
    with pytest.raises(tessera.UniqueViolation) as error:
        tasks.insert(Task(2, "two", 5, email="a@x"))
    copy = pickle.loads(pickle.dumps(error.value))
    assert type(copy) is tessera.UniqueViolation
    assert (copy.collection, copy.index, copy.key, copy.holder) == ("task", "email", "2", "1")
    assert str(copy) == str(error.value)
