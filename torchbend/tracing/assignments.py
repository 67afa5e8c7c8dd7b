"""Module attributes that forward replaces (a cache grown, a buffer made again): recorded as
assignments the graph performs, and guarded so that a call after one retraces."""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from .attributes import ModuleState
from .flow import effect
from .records import NodeRecord, set_record

__all__ = [
    "Assigned",
    "Snapshot",
    "assign_attribute",
    "assigned_since",
    "identity_guards",
    "in_leaf",
    "is_tensor_like",
    "record_assignments",
]

_KEYS: weakref.WeakKeyDictionary[nn.Module, int] = weakref.WeakKeyDictionary()
_OWNERS: dict[int, weakref.ref[nn.Module]] = {}
_COUNT = itertools.count()
_REPLACED: weakref.WeakKeyDictionary[nn.Module, set[tuple[bool, str]]] = weakref.WeakKeyDictionary()
"""Every attribute some trace saw forward replace, by module: later traces guard on them too."""
_ABSENT = object()


def _owner_key(module: nn.Module) -> int:
    key = _KEYS.get(module)
    if key is None:
        key = _KEYS[module] = next(_COUNT)
        _OWNERS[key] = weakref.ref(module, lambda _: _OWNERS.pop(key, None))
    return key


@effect
def assign_attribute(owner: int, name: str, buffer: bool, value: Any) -> None:
    """What ``self.<name> = value`` (or ``register_buffer``) in forward did, done by a graph:
    to the wrapped module itself, as its eager call does."""
    module = _OWNERS[owner]()
    if module is None:
        return
    if buffer:
        module._buffers[name] = value
    else:
        vars(module)[name] = value


@dataclass(frozen=True)
class Assigned:
    """One attribute forward replaced while tracing."""

    module: nn.Module
    path: str
    name: str
    buffer: bool
    value: Any

    def arguments(self) -> tuple[int, str, bool]:
        return (_owner_key(self.module), self.name, self.buffer)

    @property
    def label(self) -> str:
        return f"{self.path}.{self.name}".lstrip(".")


Snapshot = list[tuple[str, nn.Module, dict[str, Any], dict[str, Any]]]
"""Each module's buffers and attributes, by identity, before a trace."""


def is_tensor_like(value: Any) -> bool:
    """A tensor, or a traced value (which a trace assigns where forward assigns a tensor)."""
    return isinstance(value, (torch.Tensor, torch.fx.Proxy))


def snapshot(root: nn.Module, skip: Callable[[nn.Module, str], bool]) -> Snapshot:
    """The buffers and tensor attributes of ``root``'s modules, except those ``skip`` names
    (leaves: their code runs at every call and makes its own assignments)."""
    return [
        (path, m, dict(m._buffers), dict(vars(m)))
        for path, m in root.named_modules(remove_duplicate=False)
        if not skip(m, path)
    ]


def assigned_since(before: Snapshot) -> list[Assigned]:
    """The buffers and tensor attributes that now hold another object than in ``before``
    (traced values or tensors), in module order."""
    found = []
    for path, m, buffers, attributes in before:
        for name, value in m._buffers.items():
            if value is not buffers.get(name, _ABSENT) and value is not None:
                found.append(Assigned(m, path, name, True, value))
        for name, value in vars(m).items():
            if name.startswith("_") or name in m._buffers:
                continue
            old = attributes.get(name, _ABSENT)
            if value is not old and (is_tensor_like(value) or is_tensor_like(old)):
                found.append(Assigned(m, path, name, False, value))
    for a in found:
        _REPLACED.setdefault(a.module, set()).add((a.buffer, a.name))
    return found


def identity_guards(modules: Iterable[nn.Module]) -> tuple[ModuleState, ...]:
    """For each module whose attributes some trace saw forward replace, a guard on which
    objects they hold: a graph traced before a replacement is not used after it (its decisions
    read the old ones), nor one that replaces them again on a call where eager code would not."""
    guards = []
    for m in modules:
        replaced = _REPLACED.get(m)
        if not replaced:
            continue
        keys = sorted(replaced)

        def read(d: dict[str, Any], keys: list[tuple[bool, str]] = keys) -> tuple[int, ...]:
            return tuple(
                id(d["_buffers"].get(name) if buffer else d.get(name)) for buffer, name in keys
            )

        guards.append(ModuleState(weakref.ref(m), read, read(vars(m))))
    return tuple(guards)


class _Tracer(Protocol):
    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool: ...

    def create_arg(self, a: Any) -> Any: ...

    def create_node(
        self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str
    ) -> torch.fx.Node: ...


def in_leaf(tracer: _Tracer, root: nn.Module) -> Callable[[nn.Module, str], bool]:
    """Whether a module (by path) is a leaf of ``tracer``'s graphs or inside one."""
    leaves = [
        f"{path}."
        for path, m in root.named_modules(remove_duplicate=False)
        if path and tracer.is_leaf_module(m, path)
    ]
    return lambda _, path: any(f"{path}.".startswith(p) for p in leaves)


def record_assignments(tracer: _Tracer, graph: torch.fx.Graph, assigned: list[Assigned]) -> None:
    """Attributes forward replaced (``self.pe = longer``, ``register_buffer``), assigned by
    the graph at its end as eager code leaves them (``restore_state`` puts the module back as
    it was: tracing is not a call)."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    with graph.inserting_before(output):
        for a in assigned:
            args = (*a.arguments(), tracer.create_arg(a.value))
            name = "assign_" + re.sub(r"\W", "_", a.label)
            node = tracer.create_node("call_function", assign_attribute, args, {}, name)
            set_record(node, NodeRecord(static=True, shape_deps=frozenset()))
