"""Objects holding traced values (dataclasses, distributions), rebuilt inside graphs."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["class_key", "find_class", "rebuild_object"]

# Classes of the objects graphs rebuild, by the name their nodes carry: torch.fx writes
# arguments into generated code by ``repr``, which a class has no usable form of.
_CLASSES: dict[str, type] = {}


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
        obj: Any = importlib.import_module(module)
        for atom in qualname.split("."):
            obj = getattr(obj, atom)
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
