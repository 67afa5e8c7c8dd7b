"""Objects holding traced values (dataclasses, distributions), rebuilt inside graphs."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from ..errors import TracingError

__all__ = [
    "attribute_at",
    "check_object_input",
    "class_key",
    "find_class",
    "holds_node",
    "labelled_leaves",
    "object_fields",
    "rebuild_object",
    "rebuilt",
]

# Classes of the objects graphs rebuild, by the name their nodes carry: torch.fx writes
# arguments into generated code by ``repr``, which a class has no usable form of.
_CLASSES: dict[str, type] = {}


def attribute_at(obj: Any, path: str) -> Any:
    """``obj.a.b.c`` for ``path`` ``"a.b.c"`` (``obj`` itself for ``""``): submodules, weights
    and attributes by their dotted path, of any object (TorchScript modules included)."""
    for atom in path.split(".") if path else []:
        obj = getattr(obj, atom)
    return obj


def class_key(cls: type) -> str:
    """The name ``rebuild_object`` finds ``cls`` by (``module:qualname``)."""
    key = f"{cls.__module__}:{cls.__qualname__}"
    if _CLASSES.setdefault(key, cls) is not cls:  # another class of that name (a local class)
        key = f"{key}@{id(cls):x}"
        _CLASSES[key] = cls
    return key


def find_class(key: str) -> type:
    cls = _CLASSES.get(key)
    if cls is None:  # a graph made in another process: import the class by its name
        module, _, qualname = key.partition(":")
        obj = attribute_at(importlib.import_module(module), qualname)
        cls = _CLASSES.setdefault(key, obj)
    return cls


def rebuild_object(
    cls: type | str, items: dict[Any, Any] | None, attributes: dict[str, Any]
) -> Any:
    """Rebuild an object of ``cls`` (a dataclass, a distribution...) from its fields.

    ``cls`` is a class or its :func:`class_key`, as graphs give it.
    """
    if isinstance(cls, str):
        cls = find_class(cls)
    obj: Any = cls.__new__(cls)  # type: ignore[call-overload]
    if items is not None:
        # The nearest built-in mapping's own ``__setitem__`` (an OrderedDict keeps its order
        # apart from the dict), bypassing the class's (ModelOutput's refuses some writes).
        mapping: Any = next(b for b in cls.__mro__ if b.__module__ in ("builtins", "collections"))
        for key, value in items.items():
            mapping.__setitem__(obj, key, value)
    obj.__dict__.update(attributes)
    return obj


def object_fields(obj: Any) -> tuple[dict[Any, Any] | None, dict[str, Any]] | None:
    """The items (of a mapping) and attributes that :func:`rebuild_object` rebuilds ``obj``
    from, or ``None`` for what graphs hold as they are (containers, modules, classes, values
    without attributes)."""
    if isinstance(obj, dict) and type(obj) is not dict:
        return dict(obj), dict(vars(obj))
    if isinstance(obj, (tuple, list, dict, slice, type)) or not hasattr(obj, "__dict__"):
        return None
    attributes = dict(vars(obj))
    if dataclasses.is_dataclass(obj):
        attributes = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)} | attributes
    return None, attributes


def holds_node(value: Any, is_node: Callable[[Any], bool]) -> bool:
    """Whether ``value`` holds a value ``is_node`` accepts (a proxy, a graph node), through
    tuples, lists, dicts and the fields of objects (a cache object's list of layer objects,
    each holding tensors), each object visited once."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        value = stack.pop()
        if is_node(value):
            return True
        if id(value) in seen or isinstance(value, torch.nn.Module):
            continue
        seen.add(id(value))
        if isinstance(value, (tuple, list)):
            stack += value
        elif type(value) is dict:
            stack += value.values()
        elif (fields := object_fields(value)) is not None:
            items, attributes = fields
            stack += [*(items or {}).values(), *attributes.values()]
    return False


def labelled_leaves(value: Any) -> list[tuple[str, Any]]:
    """The tensors and plain values ``value`` holds, each with where it is (``[0]``,
    ``['logits']``, ``.layers[1].keys``), through tuples, lists, mappings (a ``ModelOutput``
    too) and the fields of objects (a cache's layers); an object met twice is walked once."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def walk(value: Any, where: str) -> None:
        if isinstance(value, (torch.Tensor, torch.nn.Module)) or id(value) in seen:
            found.append((where, value))
            return
        if isinstance(value, (tuple, list)):
            seen.add(id(value))
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")
        elif isinstance(value, dict):
            seen.add(id(value))
            for k, v in value.items():
                walk(v, f"{where}[{k!r}]")
        elif (fields := object_fields(value)) is not None and not isinstance(value, dict):
            seen.add(id(value))
            for k, v in fields[1].items():
                if not k.startswith("_"):
                    walk(v, f"{where}.{k}")
        else:
            found.append((where, value))

    walk(value, "")
    return found


def rebuilt(
    value: Any,
    make: Callable[[type, dict[Any, Any] | None, dict[str, Any]], Any],
    unpack: Callable[[dict[Any, Any]], Any] | None = None,
) -> Any:
    """``value`` (an output holding graph nodes) with each object :func:`object_fields` takes
    apart replaced by ``make(cls, items, attributes)``, through tuples, lists and dicts;
    ``unpack`` turns a dict that stands for an object back into it (or gives ``None``)."""
    if isinstance(value, torch.fx.Node):
        return value
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(rebuilt(v, make, unpack) for v in value)
    if type(value) is dict:
        obj = None if unpack is None else unpack(value)
        if obj is not None:
            return rebuilt(obj, make, unpack)
        return {k: rebuilt(v, make, unpack) for k, v in value.items()}
    fields = object_fields(value)
    if fields is None:
        return value
    items, attributes = fields
    return make(
        type(value),
        None if items is None else {k: rebuilt(v, make, unpack) for k, v in items.items()},
        {k: rebuilt(v, make, unpack) for k, v in attributes.items()},
    )


def check_object_input(owner: str, name: str, value: Any) -> None:
    """Refuse an argument holding tensors inside objects (a cache of keys and values from a
    previous call): the concrete tracer would bake its tensors into the graph as constants,
    and write its traced values into the caller's object."""
    if not holds_node(value, lambda v: isinstance(v, torch.Tensor)):
        return
    raise TracingError(
        f"{owner}: argument {name!r} is a {type(value).__name__} holding tensors inside an "
        "object; graphs take tensors as inputs only directly or in tuples, lists and dicts "
        "(an object like it is fine as an output: a cache the call builds). Trace the call "
        f"without {name!r} (a first step, whose output carries the cache), or with "
        "backend='export' if the class is registered as a pytree."
    )
