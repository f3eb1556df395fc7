"""Keys encoded once as stored keys (a str or int key without an intermediate document), and
records built by filling a new instance's ``__dict__`` when that is what the dataclass's
generated ``__init__`` would do (anything else still calls the class)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera._schema import _filled_like_init

from conftest import Task


@tessera.record(key="name")
@dataclasses.dataclass
class Tag:
    name: str
    uses: int


@tessera.record(key=["day", "name"])
@dataclasses.dataclass
class Event:
    day: int
    name: str


# Keys ---------------------------------------------------------------------------------------


def test_str_and_int_keys_read_and_delete(db):
    tags, tasks = db.collection(Tag), db.collection(Task)
    tags.insert_many([Tag("a", 1), Tag("é\u2603", 2)])
    tasks.insert_many([Task(-(2**63), "min", 1), Task(2**63 - 1, "max", 2)])
    assert tags.get("é\u2603") == Tag("é\u2603", 2)
    assert tasks.get(-(2**63)).title == "min" and tasks.get(2**63 - 1).title == "max"
    assert tags.get_many(["a", "missing"]) == [Tag("a", 1), None]
    assert tags.delete("a") is True and tags.delete("a") is False
    tasks.delete_many([2**63 - 1])
    assert tasks.get(2**63 - 1) is None and tasks.get(-(2**63)) is not None


def test_a_delete_batch_reports_outcomes_in_the_callers_order(db):
    """The batch deletes in stored-key order; each outcome is reported at its key's position,
    and a key given twice is deleted by its first appearance."""
    tags = db.collection(Tag)
    tags.insert_many([Tag(name, 1) for name in "abc"])
    outcomes = db._native.delete_keys(tags.name, ["c", "a", "missing", "a", "b"])
    assert outcomes == ["deleted", "deleted", "unchanged", "unchanged", "deleted"]
    assert len(tags) == 0


def test_a_key_of_the_wrong_type_names_the_key_field_and_deletes_nothing(db):
    tags, tasks = db.collection(Tag), db.collection(Task)
    tags.insert(Tag("a", 1))
    tasks.insert(Task(1, "one", 1))
    for collection, key, field in [(tags, 1, "name"), (tasks, "1", "id"), (tasks, True, "id"), (tasks, 2**63, "id")]:
        with pytest.raises(tessera.SchemaViolation) as raised:
            collection.get(key)
        assert raised.value.path == field, key
        with pytest.raises(tessera.SchemaViolation):
            collection.delete_many(["a", key] if collection is tags else [1, key])
    assert tags.get("a") is not None and tasks.get(1) is not None, "a refused batch deletes nothing"
    with pytest.raises(tessera.Error):
        tags.get("\ud800")  # a lone surrogate: not storable text
    with pytest.raises(tessera.Error):
        tasks.get(2**64)  # beyond any stored integer


def test_composite_keys_take_the_general_path(db):
    events = db.collection(Event)
    events.insert_many([Event(3, "launch"), Event(4, "review")])
    assert events.get((3, "launch")) == Event(3, "launch")
    assert events.delete((3, "launch")) is True
    assert events.get((3, "launch")) is None and events.get((4, "review")) is not None
    with pytest.raises(tessera.SchemaViolation):
        events.get(("3", "launch"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(min_value=-5, max_value=5), max_size=12),
    st.dictionaries(st.text(max_size=8), st.integers(min_value=0, max_value=9), max_size=12),
    st.data(),
)
def test_keyed_reads_and_deletes_match_a_dict(db, by_id, by_name, data):
    """Oracle: a dict per collection. Keys are read and deleted by the str and int fast paths,
    inside and outside write blocks, together with keys that were never stored."""
    tasks, tags = db.collection(Task), db.collection(Tag)
    tasks.delete_many([task.id for task in tasks.query()])
    tags.delete_many([tag.name for tag in tags.query()])
    tasks.insert_many([Task(key, "t", value) for key, value in by_id.items()])
    tags.insert_many([Tag(key, value) for key, value in by_name.items()])
    doomed_ids = data.draw(st.lists(st.sampled_from(sorted(by_id)) if by_id else st.nothing(), unique=True))
    doomed_names = data.draw(st.lists(st.sampled_from(sorted(by_name)) if by_name else st.nothing(), unique=True))
    with db.write():
        for key in doomed_ids:
            assert tasks.get(key).priority == by_id[key]
            tasks.delete(key)
    tags.delete_many(doomed_names)
    for key in doomed_ids:
        del by_id[key]
    for key in doomed_names:
        del by_name[key]
    probe_ids = list(by_id) + data.draw(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4))
    probe_names = list(by_name) + data.draw(st.lists(st.text(max_size=8), max_size=4))
    assert [None if task is None else task.priority for task in tasks.get_many(probe_ids)] == [by_id.get(key) for key in probe_ids]
    assert [None if tag is None else tag.uses for tag in tags.get_many(probe_names)] == [by_name.get(key) for key in probe_names]


# Building records ---------------------------------------------------------------------------


@tessera.record(key="id")
@dataclasses.dataclass
class Derived:
    id: int
    price: float
    vat: float = 0.0

    def __post_init__(self) -> None:
        self.with_vat = self.price * (1 + self.vat)


@tessera.record(key="id")
@dataclasses.dataclass
class Counted:
    id: int
    label: str
    sets = 0  # not a field: attribute writes through __setattr__

    def __setattr__(self, name, value) -> None:
        type(self).sets += 1
        object.__setattr__(self, name, value)


@tessera.record(key="id")
@dataclasses.dataclass(init=False)
class HandInit:
    id: int
    note: Optional[str] = None

    def __init__(self, id: int, note: Optional[str] = None) -> None:
        self.id = id
        self.note = note
        self.built_by_init = True


@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    x: int


@dataclasses.dataclass
class NotInit:
    x: int
    y: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass
class Slotted:
    __slots__ = ("x",)
    x: int


@dataclasses.dataclass
class WithInitVar:
    x: int
    scale: dataclasses.InitVar[int] = 1


@dataclasses.dataclass
class Plain:
    x: int
    y: Optional[str] = None


def test_only_a_generated_init_with_nothing_intercepting_is_filled_directly():
    assert _filled_like_init(Plain) and _filled_like_init(FrozenPoint) and _filled_like_init(Tag)
    for cls in (Derived, Counted, HandInit, NotInit, Slotted, WithInitVar):
        assert not _filled_like_init(cls), cls.__name__


def test_filled_records_equal_constructed_ones_and_stay_ordinary(db):
    tags = db.collection(Tag)
    tags.insert(Tag("a", 1))
    got = tags.get("a")
    assert type(got) is Tag and got == Tag("a", 1) and vars(got) == vars(Tag("a", 1))
    got.uses += 1  # an ordinary, mutable instance
    tags.upsert(got)
    assert tags.get("a").uses == 2


def test_classes_that_are_not_filled_directly_still_run_their_code(db):
    derived = db.collection(Derived)
    derived.insert(Derived(1, 10.0, 0.5))
    assert derived.get(1).with_vat == 15.0, "__post_init__ ran"
    counted = db.collection(Counted)
    counted.insert(Counted(1, "x"))
    before = Counted.sets
    assert counted.get(1) == Counted(1, "x")
    assert Counted.sets == before + 4, "__setattr__ ran for both fields (and twice more for the compared one)"
    hand = db.collection(HandInit)
    hand.insert(HandInit(1, "n"))
    assert hand.get(1).built_by_init is True, "the hand-written __init__ ran"


def test_a_commit_names_its_collections_and_kinds_by_any_equal_str(db):
    """A batch names a collection by the same str object again and again, or by equal ones
    made at run time; kinds likewise; an unknown kind is refused and nothing is written."""
    tags, tasks = db.collection(Tag), db.collection(Task)
    made = "".join(["ta", "g"])  # equal to tags.name, not the same object
    upsert = "".join(["up", "sert"])
    outcomes = db._native.commit(
        [
            ("upsert", tags.name, {"name": "a", "uses": 1}),
            (upsert, made, {"name": "b", "uses": 2}),
            ("insert", tasks.name, {"id": 1, "title": "t", "priority": 1, "email": None}),
            ("delete", made, "a"),
        ]
    )
    assert outcomes == ["inserted", "inserted", "inserted", "deleted"]
    assert tags.get("b") == Tag("b", 2) and tags.get("a") is None and tasks.get(1) is not None
    with pytest.raises(ValueError):
        db._native.commit([("upsert", tags.name, {"name": "c", "uses": 3}), ("merge", tags.name, {"name": "d", "uses": 4})])
    assert tags.get("c") is None


@tessera.record(key="x", name="with_default")
@dataclasses.dataclass
class WithDefault:
    x: int
    y: Optional[str] = "default"
    z: int = 7


@tessera.record(key="x", name="frozen_filled")
@dataclasses.dataclass(frozen=True)
class FrozenFilled:
    x: int
    label: str


def test_a_filled_record_has_the_attributes_its_init_sets_and_a_frozen_one_stays_frozen(db):
    plain = db.collection(WithDefault)
    plain.insert(WithDefault(1, "y", 2))
    got = plain.get(1)
    made = WithDefault(1, "y", 2)
    assert got == made and vars(got) == vars(made) and list(vars(got)) == ["x", "y", "z"]
    got.z += 1
    assert got.z == 3
    frozen = db.collection(FrozenFilled)
    frozen.insert(FrozenFilled(1, "f"))
    kept = frozen.get(1)
    assert kept == FrozenFilled(1, "f") and vars(kept) == {"x": 1, "label": "f"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        kept.label = "g"  # type: ignore[misc]
    assert hash(kept) == hash(FrozenFilled(1, "f"))

