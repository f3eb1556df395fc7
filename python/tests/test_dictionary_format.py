"""The dictionary as a MutableMapping, and the format functions."""

from __future__ import annotations

from collections.abc import MutableMapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera


def test_dictionary_is_a_mutable_mapping(tmp_path):
    with tessera.open(tmp_path / "d.tessera") as db:
        settings_ = db.dictionary("settings")
        assert isinstance(settings_, MutableMapping)
        settings_["theme"] = {"dark": True, "size": 12, "fonts": ["a", "b"]}
        settings_["none"] = None
        assert settings_["theme"]["fonts"] == ["a", "b"]
        assert settings_["none"] is None and "none" in settings_
        assert settings_.get("missing", 5) == 5
        with pytest.raises(KeyError):
            settings_["missing"]
        with pytest.raises(KeyError):
            del settings_["missing"]
        settings_.update({"a": 1, "b": 2.5})
        assert sorted(settings_) == ["a", "b", "none", "theme"]
        assert len(settings_) == 4
        del settings_["a"]
        assert "a" not in settings_
        settings_.flush()
        with pytest.raises(tessera.EncodeError) as error:
            settings_["bad"] = {"x": [1, object()]}
        assert error.value.path == "x[1]"
        assert "bad" not in settings_
    with tessera.open(tmp_path / "d.tessera") as db:
        assert db.dictionary("settings")["b"] == 2.5


def test_dumps_loads_json():
    value = {"a": [1, 2.5, "x", None, True, b"\x00"], "b": {"c": -(2**63), "d": 2**64 - 1}}
    data = tessera.dumps(value)
    assert isinstance(data, bytes)
    assert tessera.loads(data) == value
    assert tessera.loads(tessera.from_json('{"x": [1, 2]}')) == {"x": [1, 2]}
    assert tessera.to_json(tessera.dumps({"x": [1, "y"]})) == '{"x":[1,"y"]}'
    with pytest.raises(tessera.JsonError):
        tessera.from_json("{nope")
    with pytest.raises(tessera.Corrupted):
        tessera.loads(b"\x00garbage")
    with pytest.raises(tessera.EncodeError):
        tessera.dumps(2**70)
    with pytest.raises(tessera.EncodeError):
        tessera.dumps({1: "int key"})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(tessera.EncodeError):
        tessera.dumps(cyclic)


def test_value_view():
    view = tessera.Value(tessera.dumps({"name": "ada", "langs": ["x", {"y": 1}]}))
    assert view["name"] == "ada"
    assert len(view) == 2 and sorted(view) == ["langs", "name"]
    langs = view["langs"]
    assert isinstance(langs, tessera.Value) and len(langs) == 2
    assert langs[0] == "x" and langs[-1]["y"] == 1
    assert view.get("missing") is None and view.get("missing", 3) == 3
    assert langs[1].to_python() == {"y": 1}
    with pytest.raises(KeyError):
        view["missing"]
    with pytest.raises(IndexError):
        langs[2]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_dumps_loads_round_trip(value):
    assert tessera.loads(tessera.dumps(value)) == value


import dataclasses  # noqa: E402
from typing import List, Optional  # noqa: E402


@dataclasses.dataclass
class Profile:
    name: str
    rank: int
    langs: List[str]
    motto: Optional[str] = None


def test_documents_get_set_update_field_observe(db):
    profiles = db.documents(Profile)
    assert profiles.get("grace") is None
    live = profiles.observe("grace")
    assert next(live).result is None
    profiles.set("grace", Profile("Grace", 1, ["cobol"]))
    assert next(live).result == Profile("Grace", 1, ["cobol"])
    profiles.update_field("grace", "rank", 2)
    assert profiles.get("grace") == Profile("Grace", 2, ["cobol"])
    assert next(live).result.rank == 2
    with pytest.raises(tessera.SchemaViolation):
        profiles.update_field("grace", "nope", 1)
    assert profiles.ids() == ["grace"]
    assert profiles.delete("grace") is True
    assert profiles.get("grace") is None
