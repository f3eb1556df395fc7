"""The extension's record encoder and decoder: records written straight from dataclass
attributes and built straight from stored bytes, on every write and read path (single, batch,
inside a transaction, queries, snapshots), and their errors with field paths."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
from typing import Dict, List, Optional, Union

import pytest

import tessera

from conftest import Address, Level, Person


class Mood(enum.Enum):
    Calm = "calm"
    Loud = "loud"


@dataclasses.dataclass
class Note:
    text: str
    stars: Optional[int] = None


@dataclasses.dataclass
class Photo:
    urls: List[str]
    size: Dict[str, float]


@tessera.record(key="id", name="entries")
@dataclasses.dataclass
class Entry:
    id: int
    flag: bool
    ratio: float
    label: str
    blob: bytes
    when: datetime.datetime
    mood: Mood
    where: Address
    body: Optional[Union[Note, Photo]]
    history: List[Address]
    counts: Dict[str, int]
    moods: List[Mood]
    maybe: Optional[datetime.datetime] = None


def entry(id: int = 1) -> Entry:
    return Entry(
        id=id,
        flag=True,
        ratio=0.25,
        label="é ünïcode ✓",
        blob=b"\x00\xff",
        when=datetime.datetime(2026, 11, 24, 21, 0, 5, 123456),
        mood=Mood.Loud,
        where=Address("Paris", "75001"),
        body=Photo(["a.png", "b.png"], {"w": 3.5}),
        history=[Address("Lyon"), Address("Nice", None)],
        counts={"a": 1, "b": -2},
        moods=[Mood.Calm, Mood.Loud],
    )


def variants() -> List[Entry]:
    first, second, third = entry(1), entry(2), entry(3)
    second.body = Note("hello", 5)
    second.maybe = datetime.datetime(2000, 1, 1)
    third.body = None
    third.history = []
    third.counts = {}
    return [first, second, third]


def test_every_supported_type_round_trips_on_every_path(db):
    entries = db.collection(Entry)
    first, second, third = variants()
    entries.insert(first)
    entries.insert_many([second])
    assert entries.upsert(third) == "inserted"
    for record in (first, second, third):
        assert entries.get(record.id) == record
    assert entries.get_many([1, 2, 3, 4]) == [first, second, third, None]
    assert list(entries.query()) == [first, second, third]
    assert [e.id for e in entries.query("body is Note")] == [2]
    with db.read() as snapshot:
        assert snapshot.get(Entry, 2) == second
        assert list(snapshot.query(Entry)) == [first, second, third]
    built = entries.get(1)
    assert type(built.mood) is Mood and type(built.where) is Address and type(built.body) is Photo
    assert type(built.when) is datetime.datetime and type(built.blob) is bytes


def test_a_transaction_reads_its_own_encoded_records(db):
    entries = db.collection(Entry)
    first, second, _ = variants()
    with db.write():
        entries.insert(first)
        entries.upsert(second)
        assert entries.get(1) == first, "read back from the queued encoding"
        assert entries.get(2) == second
        first.label = "changed after the insert"
        assert entries.get(1).label == "é ünïcode ✓"
        entries.delete(2)
        assert entries.get(2) is None
        with pytest.raises(tessera.DuplicateKey):
            entries.insert(entry(1))
    assert entries.get(1).label == "é ünïcode ✓"
    assert entries.get(2) is None


def test_an_int_for_a_float_field_is_stored_as_a_float(db):
    entries = db.collection(Entry)
    record = entry()
    record.ratio = 3  # type: ignore[assignment]
    entries.insert(record)
    stored = entries.get(1).ratio
    assert stored == 3.0 and type(stored) is float


@pytest.mark.parametrize(
    "change, path",
    [
        (lambda e: setattr(e, "label", 5), "label"),
        (lambda e: setattr(e, "where", Address(7)), "where.city"),  # type: ignore[arg-type]
        (lambda e: setattr(e, "body", Photo(["ok", 2], {})), "body.Photo.urls[1]"),  # type: ignore[list-item]
        (lambda e: setattr(e, "body", Note("x", "many")), "body.Note.stars"),  # type: ignore[arg-type]
        (lambda e: setattr(e, "history", [Address("a"), Address(None)]), "history[1].city"),  # type: ignore[arg-type]
        (lambda e: setattr(e, "counts", {"a": "one"}), "counts.a"),
        (lambda e: setattr(e, "mood", "Sleepy"), "mood"),
        (lambda e: setattr(e, "moods", [Mood.Calm, Level.High]), "moods[1]"),
        (lambda e: setattr(e, "when", "yesterday"), "when"),  # a str is not a datetime: refused, not stored as text
        (lambda e: setattr(e, "flag", 1), "flag"),
    ],
)
def test_a_wrong_type_names_its_path_on_every_write_path(db, change, path):
    entries = db.collection(Entry)
    record = entry()
    change(record)
    for write in (entries.insert, entries.upsert, lambda r: entries.insert_many([entry(9), r])):
        with pytest.raises(tessera.SchemaViolation) as error:
            write(record)
        assert error.value.path == path
        assert error.value.collection == "entries"
    with pytest.raises(tessera.SchemaViolation) as error:
        with db.write():
            entries.insert(record)
    assert error.value.path == path
    assert entries.count() == 0, "nothing written"


def test_an_unstorable_value_fails_at_the_call_with_its_path(db):
    entries = db.collection(Entry)
    record = entry()
    record.history = [Address("a"), Address(object())]  # type: ignore[arg-type]
    with pytest.raises(tessera.SchemaViolation) as error:
        entries.insert(record)
    assert error.value.path == "history[1].city"
    with pytest.raises(tessera.SchemaViolation) as error:
        with db.write():
            entries.upsert(record)
    assert error.value.path == "history[1].city"
    assert entries.count() == 0


def test_another_class_is_refused_at_the_top_level(db):
    @dataclasses.dataclass
    class Imposter:
        id: int

    entries = db.collection(Entry)
    with pytest.raises(tessera.SchemaViolation) as error:
        entries.insert(Imposter(1))  # type: ignore[arg-type]
    assert "expected a Entry, got Imposter" in str(error.value)


def test_a_missing_attribute_is_a_missing_field(db):
    entries = db.collection(Entry)
    record = entry()
    del record.label
    with pytest.raises(tessera.SchemaViolation) as error:
        entries.insert(record)
    assert error.value.path == "label" and "missing" in error.value.problem
    record = entry()
    del record.maybe  # an optional field: stored as None
    entries.insert(record)
    assert entries.get(1).maybe is None


@tessera.record(key="id")
@dataclasses.dataclass(frozen=True)
class Frozen:
    id: int
    where: Address


if sys.version_info >= (3, 10):

    @tessera.record(key="id")
    @dataclasses.dataclass(slots=True)
    class Slotted:
        id: int
        label: str
        where: Optional[Address] = None


def test_frozen_and_slotted_dataclasses_round_trip(db):
    frozen = db.collection(Frozen)
    frozen.insert(Frozen(1, Address("Rome")))
    assert frozen.get(1) == Frozen(1, Address("Rome"))
    if sys.version_info < (3, 10):
        return  # dataclasses take slots=True from 3.10 on
    slotted = db.collection(Slotted)
    slotted.insert_many([Slotted(1, "a"), Slotted(2, "b")])
    assert list(slotted.query()) == [Slotted(1, "a"), Slotted(2, "b")]
    slotted.upsert(Slotted(2, "c", Address("Oslo")))
    assert slotted.get(2) == Slotted(2, "c", Address("Oslo"))


def test_person_from_the_shared_fixtures_round_trips_through_a_batch(db):
    people = db.collection(Person)
    batch = [
        Person("a", 1, 1.5, True, b"", Address("x"), [], Level.Low, datetime.datetime(1, 1, 1), {}),
        Person("b", -(2**63), -0.0, False, b"\x00", Address("y", "z"), ["t"], Level.High, datetime.datetime(9999, 1, 1), {"k": 1}, "nick"),
    ]
    people.insert_many(batch)
    assert people.get_many(["a", "b"]) == batch
    people.delete_many(["a", "b", "c"])
    assert people.count() == 0
