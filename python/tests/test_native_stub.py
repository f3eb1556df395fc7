"""``tessera/_native.pyi`` describes the extension module as it is: every class, function,
method and attribute of ``tessera._native``, with the same parameter names and defaults."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from tessera import _native

# The stub in this tree (the one the package ships).
STUB = Path(__file__).resolve().parent.parent / "tessera" / "_native.pyi"

# What a class's __dict__ holds besides its API.
NOT_API = {"__doc__", "__module__", "__new__", "__dict__", "__weakref__"}


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def stub_parameters(function: ast.FunctionDef) -> List[Tuple[str, Optional[Any]]]:
    """``function``'s parameters after ``self``, each with its default (``...`` for none)."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults: List[Any] = [...] * (len(positional) - len(args.defaults)) + [ast.literal_eval(d) for d in args.defaults]
    pairs = [(arg.arg, default) for arg, default in zip(positional, defaults)]
    pairs += [(arg.arg, ... if d is None else ast.literal_eval(d)) for arg, d in zip(args.kwonlyargs, args.kw_defaults)]
    return pairs[1:] if pairs and pairs[0][0] in ("self", "cls") else pairs


def runtime_parameters(function: Any) -> Optional[List[Tuple[str, Any]]]:
    """The extension's text signature of ``function`` (after ``self``), or None without one
    or for a positional-only slot (``__len__``) whose names do not matter."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    parameters = [p for p in signature.parameters.values() if p.name not in ("self", "$self")]
    if any(p.kind is p.POSITIONAL_ONLY for p in parameters):
        return None
    return [(p.name, ... if p.default is p.empty else p.default) for p in parameters]


def stub_classes() -> Dict[str, Dict[str, Any]]:
    """Each stub class: its methods (FunctionDef) and annotated attributes (None)."""
    classes: Dict[str, Dict[str, Any]] = {}
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef):
            members: Dict[str, Any] = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members[item.name] = item
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members[item.target.id] = None
            classes[node.name] = members
    return classes


def runtime_classes() -> Dict[str, type]:
    return {name: value for name, value in vars(_native).items() if isinstance(value, type)}


def test_stub_has_every_class_of_the_extension_and_no_other():
    assert set(stub_classes()) == set(runtime_classes())


def test_stub_has_every_function_and_constant_of_the_extension():
    tree = stub_tree()
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    constants = {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    runtime_functions = {name for name, value in vars(_native).items() if callable(value) and not isinstance(value, type)}
    assert set(functions) == runtime_functions
    for name in runtime_functions:
        assert stub_parameters(functions[name]) == runtime_parameters(getattr(_native, name)), name
    runtime_constants = {name for name, value in vars(_native).items() if name.isupper() and isinstance(value, int)}
    assert runtime_constants and runtime_constants <= constants


def test_stub_classes_have_every_method_and_attribute_with_the_extensions_parameters():
    stubs = stub_classes()
    for class_name, cls in runtime_classes().items():
        stub = stubs[class_name]
        runtime = {name for name in vars(cls) if name not in NOT_API}
        assert runtime == set(stub) - {"__init__"}, class_name
        for name in runtime:
            expected = runtime_parameters(getattr(cls, name))
            if expected is not None:
                assert stub[name] is not None, f"{class_name}.{name} is a method"
                assert stub_parameters(stub[name]) == expected, f"{class_name}.{name}"
        # A class Python constructs has the constructor's signature as __init__.
        constructor = getattr(cls, "__text_signature__", None)
        if constructor is not None:
            assert "__init__" in stub, f"{class_name}() is constructed from Python"
            assert stub_parameters(stub["__init__"]) == runtime_parameters(cls), f"{class_name}.__init__"
        else:
            assert "__init__" not in stub, f"{class_name} is not constructed from Python"


def test_stub_names_subscribe_object_and_the_object_subscription_it_returns(db, tasks):
    stubs = stub_classes()
    function = stubs["Database"]["subscribe_object"]
    assert isinstance(function.returns, ast.Name) and function.returns.id == "ObjectSubscription"
    assert "next" in stubs["ObjectSubscription"]
    live = db._native.subscribe_object(tasks.name, 1, None)
    assert type(live) is _native.ObjectSubscription
    assert live.next(timeout=5) == ("initial", None)
