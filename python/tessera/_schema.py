"""Dataclasses as tessera schemas: the stored shape from type hints, and records both ways.

The shape is the Rust side's ``TypeDesc`` (as serde writes it to JSON), so a Rust
``#[derive(Record)]`` type of the same shape reads and writes the same collection:

=====================  ==========================  ==================================
Python type hint       stored shape                Rust type
=====================  ==========================  ==================================
``int``                ``Int``                     any integer (``i64`` for a key)
``float``              ``Float``                   ``f64``
``str``                ``String``                  ``String``
``bytes``              ``Bytes``                   ``serde_bytes::ByteBuf``
``bool``               ``Bool``                    ``bool``
``Optional[T]``        ``Option(T)``               ``Option<T>``
``list[T]``            ``List(T)``                 ``Vec<T>``
``dict[str, T]``       ``Map(T)``                  ``HashMap<String, T>``
nested dataclass       ``Struct``                  a struct deriving ``Embed``
``enum.Enum``          ``Enum`` of member names    a unit-variant enum deriving ``Embed``
``Union[A, B]``        ``Enum`` with payloads      an enum with struct variants ``A``, ``B``
``datetime``           ``String`` (ISO 8601)       ``String``
=====================  ==========================  ==================================

A value of another type than its field declares is refused with
:class:`tessera.SchemaViolation` naming the field path, never stored as something that would
read back as another type: an ``Enum`` field takes a member (not its name), a ``datetime``
field a ``datetime`` (not a str), a nested dataclass or a ``Union`` variant an instance of
exactly that class (not a dict, nor a subclass, whose own fields would be lost). Three
conversions are made, as the dictionary API makes them:

* an ``int`` for a ``float`` field is stored as a float when a float holds it exactly
  (``|n| <= 2**53``, or a larger multiple of a large enough power of two); any other int is
  refused rather than rounded;
* a ``tuple`` for a ``list`` field is stored as a list (read back as a list);
* a ``bytearray`` for a ``bytes`` field is stored as bytes (read back as bytes).

A ``datetime`` is stored as ISO 8601 text: an aware one (with an offset) converted to UTC,
the same instant, so that ``order by`` and comparisons follow time whatever the offsets
written (``10:00+05:00`` sorts before ``06:00+00:00``); it reads back equal, with
``tzinfo=timezone.utc``. A naive one is stored as its ``isoformat()``, without ``fold`` (the
flag that picks the second of two equal wall times at a DST change): it reads back with
``fold=0``; store aware datetimes where that matters, and do not mix naive and aware ones in
one field (Python cannot order them either). A ``datetime`` is a query literal too
(``C.at > moment``), converted the same way. A stored str that is not an ISO 8601 date (written by another program) reads as
:class:`tessera.SchemaMismatch` naming the record's key and the field.

A ``float`` primary key is normalised as Python compares floats: ``-0.0`` is stored and looked
up as ``0.0`` (one key; inserting both raises :class:`tessera.DuplicateKey`), and NaN, which
equals nothing, is refused as a key with :class:`tessera.SchemaViolation`. (The stored key
encoding itself orders ``-0.0`` before ``0.0``, as a Rust ``f64`` key does: the
normalisation is the Python layer's, so files keep their encoding.)
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import sys
import types
import typing
from typing import Any, Callable

from ._query import datetime_text
from .errors import UnsupportedType

# Deepest nesting of dataclasses and containers in a schema.
SCHEMA_DEPTH_MAX = 32

_NONE_TYPE = type(None)


_UNION_TYPES = (typing.Union,) + ((types.UnionType,) if sys.version_info >= (3, 10) else ())


def _is_optional(hint: Any) -> Any:
    """The T of ``Optional[T]`` / ``T | None`` (a Union of the rest if there are several), or
    None."""
    if typing.get_origin(hint) in _UNION_TYPES:
        arguments = typing.get_args(hint)
        rest = tuple(argument for argument in arguments if argument is not _NONE_TYPE)
        if len(rest) == len(arguments) - 1:
            return rest[0] if len(rest) == 1 else typing.Union[rest]
    return None


def _variants(hint: Any) -> Any:
    """The dataclasses of a ``Union`` of dataclasses (each a variant), or None."""
    if typing.get_origin(hint) in _UNION_TYPES:
        arguments = typing.get_args(hint)
        if all(isinstance(argument, type) and dataclasses.is_dataclass(argument) for argument in arguments):
            return arguments
    return None


class Field:
    """How one type hint is stored: its shape, and converters to and from stored values
    (``None`` where the value is stored as it is)."""

    __slots__ = ("shape", "encode", "decode", "plan", "encoding", "check")

    def __init__(
        self,
        shape: Any,
        encode: Callable | None,
        decode: Callable | None,
        plan: Any = None,
        encoding: Any = None,
        check: Callable | None = None,
    ) -> None:
        self.shape = shape
        self.encode = encode
        self.decode = decode
        # ``check(value, path)``: the stored value, strictly (see the module docs), or
        # :class:`WrongValue` naming ``path``. Used where no extension encoder runs
        # (documents).
        self.check = check
        # How the extension builds the value (see python/src/plan.rs); None: as stored.
        self.plan = plan
        # How the extension encodes the value (see python/src/encode.rs); None: as it is.
        self.encoding = encoding


def describe(hint: Any, path: str, depth: int = 0) -> Field:
    """The :class:`Field` for ``hint``; :class:`UnsupportedType` naming ``path`` if tessera
    cannot store it."""
    if depth > SCHEMA_DEPTH_MAX:
        raise UnsupportedType(
            f"field `{path}`: nested deeper than {SCHEMA_DEPTH_MAX} levels", path=path, annotation=hint
        )
    if hint is bool:
        return Field("Bool", None, None, check=_check_bool)
    if hint is int:
        return Field("Int", None, None, check=_check_int)
    if hint is float:
        return Field("Float", _float_in, None, None, ("float",), check=_check_float)
    if hint is str:
        return Field("String", None, None, check=_check_str)
    if hint is bytes:
        return Field("Bytes", None, None, check=_check_bytes)
    if hint is datetime.datetime:
        plan = ("call", datetime.datetime.fromisoformat)
        return Field(
            "String",
            _datetime_in(path),
            datetime.datetime.fromisoformat,
            plan,
            ("datetime", datetime.datetime, datetime_text),
            check=_check_datetime,
        )
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_field(hint, path)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _struct_field(hint, path, depth)
    inner = _is_optional(hint)
    if inner is not None:
        field = describe(inner, path, depth + 1)
        encode = None if field.encode is None else (lambda value, f=field.encode: None if value is None else f(value))
        decode = None if field.decode is None else (lambda value, f=field.decode: None if value is None else f(value))
        plan = None if field.plan is None else ("optional", field.plan)
        encoding = None if field.encoding is None else ("optional", field.encoding)

        def check_optional(value: Any, path: str, inner: Callable = field.check) -> Any:
            return None if value is None else inner(value, path)

        return Field({"Option": field.shape}, encode, decode, plan, encoding, check_optional)
    variants = _variants(hint)
    if variants is not None:
        return _union_field(variants, path, depth)
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin in (list, typing.List) and len(arguments) == 1:
        item = describe(arguments[0], f"{path}[]", depth + 1)
        encode = None if item.encode is None else (lambda values, f=item.encode: [f(value) for value in values])
        decode = None if item.decode is None else (lambda values, f=item.decode: [f(value) for value in values])
        plan = None if item.plan is None else ("list", item.plan)

        def check_list(values: Any, path: str, inner: Callable = item.check) -> Any:
            if not isinstance(values, (list, tuple)):  # a tuple is stored as a list
                raise WrongValue.of("a list", values, path)
            return [inner(value, f"{path}[{index}]") for index, value in enumerate(values)]

        encoding = None if item.encoding is None else ("list", item.encoding)
        return Field({"List": item.shape}, encode, decode, plan, encoding, check_list)
    if origin in (dict, typing.Dict) and len(arguments) == 2 and arguments[0] is str:
        item = describe(arguments[1], f"{path}{{}}", depth + 1)
        encode = None if item.encode is None else (lambda values, f=item.encode: {k: f(v) for k, v in values.items()})
        decode = None if item.decode is None else (lambda values, f=item.decode: {k: f(v) for k, v in values.items()})
        plan = None if item.plan is None else ("map", item.plan)

        def check_map(values: Any, path: str, inner: Callable = item.check) -> Any:
            if not isinstance(values, dict):
                raise WrongValue.of("a dict", values, path)
            checked = {}
            for key, value in values.items():
                if not isinstance(key, str):
                    raise WrongValue(path, f"a dict key that is not a str ({key!r})")
                checked[key] = inner(value, f"{path}.{key}")
            return checked

        encoding = None if item.encoding is None else ("map", item.encoding)
        return Field({"Map": item.shape}, encode, decode, plan, encoding, check_map)
    raise UnsupportedType(
        f"field `{path}`: tessera cannot store {hint!r} (int, float, str, bytes, bool, Optional, "
        "list, dict[str, T], nested dataclasses, a Union of dataclasses, Enum and datetime can be stored)",
        path=path,
        annotation=hint,
    )


class WrongValue(Exception):
    """A value that is not of its field's declared type: the field ``path`` and the
    ``problem`` (turned into :class:`tessera.SchemaViolation` by the caller, which knows the
    collection and key)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"field `{path}`: {problem}")
        self.path = path
        self.problem = problem

    @classmethod
    def of(cls, expected: str, value: Any, path: str) -> "WrongValue":
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:60] + "…"
        return cls(path, f"expected {expected}, got a {type(value).__name__} ({shown})")


# The integers a document holds: i64 and u64.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def _check_bool(value: Any, path: str) -> Any:
    if type(value) is not bool:
        raise WrongValue.of("a bool", value, path)
    return value


def _check_int(value: Any, path: str) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        raise WrongValue.of("an int", value, path)
    if not _INT_MIN <= value <= _INT_MAX:
        raise WrongValue(path, f"the int {value} is outside the 64-bit range (-2**63 to 2**64-1)")
    return int(value)


def exact_float(value: Any, path: str) -> float:
    """``value`` (a float, or an int a float holds exactly) as a float; :class:`WrongValue`
    otherwise: an int is never rounded."""
    if isinstance(value, float):
        return float(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise WrongValue.of("a float", value, path)
    try:
        converted = float(value)
    except OverflowError:
        converted = None
    # int == float compares exact values in Python.
    if converted is None or converted != value:
        raise WrongValue(
            path,
            f"the int {value} has no exact float value (a float field takes an int only when a float holds it "
            "exactly: |n| <= 2**53, or a multiple of a large enough power of two)",
        )
    return converted


_check_float = exact_float


def _check_str(value: Any, path: str) -> Any:
    if not isinstance(value, str):
        raise WrongValue.of("a str", value, path)
    return str(value)


def _check_bytes(value: Any, path: str) -> Any:
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, bytearray):  # stored as bytes, as the dictionary API does
        return bytes(value)
    raise WrongValue.of("bytes", value, path)


def _check_datetime(value: Any, path: str) -> Any:
    if not isinstance(value, datetime.datetime):
        raise WrongValue.of("a datetime", value, path)
    return datetime_text(value)


def _float_in(value: Any) -> Any:
    # An int given for a float field is stored as a float when one holds it exactly.
    return exact_float(value, "") if type(value) is int else value


def _datetime_in(path: str) -> Callable:
    def encode(value: Any) -> Any:
        if isinstance(value, datetime.datetime):
            return datetime_text(value)
        return value  # the schema check names the field

    return encode


def _enum_field(cls: type, path: str) -> Field:
    members = list(cls.__members__.keys())
    by_name = cls.__members__

    def encode(value: Any) -> Any:
        return value.name if isinstance(value, cls) else value

    def decode(value: Any) -> Any:
        return by_name[value]

    def check(value: Any, path: str) -> Any:
        if not isinstance(value, cls):
            raise WrongValue.of(f"a {cls.__name__} member", value, path)
        return value.name

    plan = ("members", dict(by_name))
    return Field({"Enum": [[name, None] for name in members]}, encode, decode, plan, plan, check)


class RecordType:
    """A dataclass as a record: field names, shape, and converters."""

    def __init__(self, cls: type, path: str = "", depth: int = 0) -> None:
        if not dataclasses.is_dataclass(cls):
            raise UnsupportedType(f"{cls!r} is not a dataclass", path=path, annotation=cls)
        self.cls = cls
        hints = typing.get_type_hints(cls)
        self.names: list[str] = []
        # Fields without a default: a stored value must have them, unless they are optional
        # (read as None, as a collection reads a field added as Optional): see from_stored.
        no_default = [
            field.name
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING  # type: ignore[misc]
        ]
        fields: list[list[Any]] = []
        self.encoders: list[tuple[str, Callable]] = []
        self.decoders: list[tuple[str, Callable]] = []
        # Each field's strict check (see Field.check), in declaration order.
        self.checks: list[tuple[str, str, Callable]] = []
        plans: list[tuple[str, Any]] = []
        encodings: list[tuple[str, Any]] = []
        for field in dataclasses.fields(cls):
            name = field.name
            full = f"{path}.{name}" if path else name
            if not field.init:
                # Written, it could never be read: a record is built by calling the class
                # with its stored fields, and the class takes no such argument.
                raise UnsupportedType(
                    f"field `{full}`: a field with init=False cannot be stored (a record is read back by calling "
                    f"{cls.__name__} with its stored fields)",
                    path=full,
                    annotation=hints[name],
                )
            described = describe(hints[name], full, depth + 1)
            self.names.append(name)
            fields.append([name, described.shape])
            self.checks.append((name, full, described.check))
            if described.encode is not None:
                self.encoders.append((name, described.encode))
            if described.decode is not None:
                self.decoders.append((name, described.decode))
            plans.append((name, described.plan))
            encodings.append((name, described.encoding))
        self.shape = {"Struct": fields}
        optional = {name for name, shape in fields if isinstance(shape, dict) and "Option" in shape}
        self.required = [name for name in no_default if name not in optional]
        self.absent_as_none = [name for name in no_default if name in optional]
        # Each field's full path, for errors.
        self.paths = {name: path for name, path, _ in self.checks}
        # The fourth element: whether the extension may build an instance by filling a new
        # object's __dict__ (what the generated __init__ does) when every field is stored.
        self.plan = ("struct", cls, plans, _filled_like_init(cls))
        # How the extension encodes an instance: each field read by name and written along
        # its node, in declaration order.
        self.encoding = ("struct", cls, encodings)
        self._native_plan: Any = None
        self._native_encoder: Any = None

    def to_stored(self, obj: Any) -> dict:
        """The record as a dict of stored values: exactly its declared fields (an attribute
        set on the instance beyond them is not stored), each checked against its declared
        type (:class:`WrongValue` naming the field path otherwise; see the module docs)."""
        if type(obj) is not self.cls:
            raise WrongValue.of(f"a {self.cls.__name__}", obj, "")
        return self.check_fields(obj)

    def check_fields(self, obj: Any) -> dict:
        """The declared fields of ``obj`` (an instance of exactly the class), checked."""
        values = {}
        for name, path, check in self.checks:
            try:
                value = getattr(obj, name)
            except AttributeError:
                raise WrongValue(path, "the field is not set") from None
            values[name] = check(value, path)
        return values

    @property
    def native_plan(self) -> Any:
        """The compiled plan the extension builds records with (made on first use)."""
        if self._native_plan is None:
            from . import _native

            self._native_plan = _native.Plan(self.plan)
        return self._native_plan

    @property
    def native_encoder(self) -> Any:
        """The compiled encoder the extension writes records with (made on first use)."""
        if self._native_encoder is None:
            from . import _native

            self._native_encoder = _native.RecordEncoder(self.encoding)
        return self._native_encoder

    def from_stored(self, values: dict) -> Any:
        """The dataclass from a stored dict: its declared fields (a stored field the class
        lacks is not read), each decoded along its type; a field not stored takes its default,
        or None if it is optional.
        :class:`WrongValue` names the field that has no default and is not stored, or whose
        stored value does not decode (a name that is no member, a str that is no date); the
        caller checks the built value's types (:meth:`check_fields`). The dict is not
        changed."""
        paths = self.paths
        missing = next((name for name in self.required if name not in values), None)
        if missing is not None:
            raise WrongValue(paths[missing], "the field is not stored (and has no default)")
        known = {name: values[name] for name in self.names if name in values}
        for name in self.absent_as_none:
            known.setdefault(name, None)
        for name, decode in self.decoders:
            if name in known:
                try:
                    known[name] = decode(known[name])
                except (KeyError, ValueError, TypeError, AttributeError) as error:
                    shown = repr(known[name])
                    shown = shown if len(shown) <= 60 else shown[:60] + "…"
                    raise WrongValue(paths[name], f"stored {shown} does not decode as the field's type ({error!r})") from None
        return self.cls(**known)


def _filled_like_init(cls: type) -> bool:
    """Whether filling a new instance's ``__dict__`` with every field does what calling
    ``cls(**fields)`` does: the class's ``__init__`` is the one ``dataclasses`` generated (no
    ``__post_init__``, no ``init=False`` field), nothing intercepts making or setting (no
    custom ``__new__``, metaclass ``__call__``, ``__setattr__`` or data descriptor on a
    field), and instances have a ``__dict__``. Anything else is built by calling the class."""
    init = getattr(cls.__init__, "__code__", None)
    if init is None or init.co_filename != "<string>" or init.co_name != "__init__":
        return False  # an __init__ written by hand (dataclasses generates its own from text)
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        return False
    if cls.__new__ is not object.__new__ or type(cls).__call__ is not type.__call__:
        return False
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.init:
        return False
    if not params.frozen and cls.__setattr__ is not object.__setattr__:
        return False
    fields = dataclasses.fields(cls)
    # Exactly the fields as parameters (an InitVar is a parameter and no field).
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]
    if parameters != [field.name for field in fields]:
        return False
    for field in fields:
        if not field.init:
            return False
        found = next((klass.__dict__[field.name] for klass in cls.__mro__ if field.name in klass.__dict__), None)
        if hasattr(type(found), "__set__"):
            return False
    return True


def _struct_field(cls: type, path: str, depth: int) -> Field:
    nested = RecordType(cls, path, depth + 1)

    def encode(value: Any) -> Any:
        return nested.to_stored(value) if isinstance(value, cls) else value

    def decode(value: Any) -> Any:
        return nested.from_stored(value) if isinstance(value, dict) else value

    def check(value: Any, path: str) -> Any:
        # Exactly the class: a subclass's own fields would be lost.
        if type(value) is not cls:
            raise WrongValue.of(f"a {cls.__name__}", value, path)
        return nested.check_fields(value)

    return Field(nested.shape, encode, decode, nested.plan, nested.encoding, check)


def _union_field(variants: tuple, path: str, depth: int) -> Field:
    """A Union of dataclasses: an enum whose variants carry payloads, stored as serde's
    externally tagged form ``{"ClassName": {fields}}`` (a Rust enum with struct variants of
    the same names)."""
    names = [cls.__name__ for cls in variants]
    if len(set(names)) != len(names):
        raise UnsupportedType(f"field `{path}`: two variants share a class name", path=path, annotation=variants)
    records = {cls: RecordType(cls, path, depth + 1) for cls in variants}
    by_name = {cls.__name__: record for cls, record in records.items()}

    def encode(value: Any) -> Any:
        record = records.get(type(value))
        return {type(value).__name__: record.to_stored(value)} if record is not None else value

    def decode(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((name, payload),) = value.items()
            record = by_name.get(name)
            if record is not None:
                return record.from_stored(payload)
        return value

    def check(value: Any, path: str) -> Any:
        record = records.get(type(value))
        if record is None:
            raise WrongValue.of("one of " + ", ".join(names), value, path)
        return {type(value).__name__: record.check_fields(value)}

    shape = {"Enum": [[cls.__name__, records[cls].shape] for cls in variants]}
    plan = ("variants", {name: record.plan for name, record in by_name.items()})
    encoding = ("variants", [(name, record.encoding) for name, record in by_name.items()])
    return Field(shape, encode, decode, plan, encoding, check)
