"""Hypothesis: any dataclass value of the supported types round-trips through a collection."""

from __future__ import annotations

import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from conftest import Address, Level, Person

people = st.builds(
    Person,
    name=st.text(min_size=1, max_size=30),
    age=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    score=st.floats(allow_nan=False),
    active=st.booleans(),
    avatar=st.binary(max_size=50),
    address=st.builds(Address, city=st.text(max_size=20), zip=st.none() | st.text(max_size=5)),
    tags=st.lists(st.text(max_size=10), max_size=5),
    level=st.sampled_from(Level),
    born=st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 1, 1)),
    extra=st.dictionaries(st.text(max_size=5), st.integers(min_value=-1000, max_value=1000), max_size=4),
    nickname=st.none() | st.text(max_size=10),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(people)
def test_person_round_trips(db, value):
    collection = db.collection(Person)
    collection.upsert(value)
    assert collection.get(value.name) == value


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(people, max_size=5, unique_by=lambda person: person.name))
def test_people_round_trip_through_a_transaction_and_a_batch(db, values):
    """The extension's encoder and decoder on the batch path and on a transaction's own reads
    (records queued encoded, read back before the commit)."""
    collection = db.collection(Person)
    collection.delete_many([value.name for value in collection.query()])
    with db.write():
        collection.upsert_many(values)
        assert [collection.get(value.name) for value in values] == values
    assert collection.get_many([value.name for value in values]) == values
    assert sorted((p.name for p in collection.query()), key=lambda name: name.encode()) == sorted(
        (value.name for value in values), key=lambda name: name.encode()
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(people)
def test_a_record_stored_as_encoded_is_what_conforming_writes(db, value):
    """A record the extension encoded with the collection's shared keys is stored as it is
    when conforming would not change it: then writing the same record as a plain dict (which
    is conformed) finds the very bytes stored, "unchanged"; and the batch and write-block
    paths agree."""
    collection = db.collection(Person)
    assert collection.upsert(value) in ("inserted", "updated", "unchanged")
    plain = dict(Person.__tessera_record__.type.to_stored(value))
    assert db._native.commit([("upsert", collection.name, plain)]) == ["unchanged"]
    with db.write():
        collection.upsert(value)
    assert collection.upsert(value) == "unchanged"
    assert collection.get(value.name) == value
