"""Plain Python attributes of the modules a trace ran through: graphs bake them in."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from .introspection import is_user_file

__all__ = ["ModuleState", "is_plain", "module_state", "runs_user_code"]

# What ``nn.Module.__init__`` sets: torch's bookkeeping, not state user code branches on.
_INTERNALS = frozenset(vars(torch.nn.Module())) - {"training"}
_GONE = object()


def is_plain(value: object) -> bool:
    """Plain Python state (a flag, a mode, a number) rather than a tensor or a container."""
    return value is None or isinstance(value, (bool, int, float, str))


@dataclass(frozen=True)
class ModuleState:
    """The plain attributes of one module (``training``, ``self.causal``, ``self.mode``) as a
    trace saw them: user code reads them without any hook seeing it, so each call compares
    them with what the graph baked in."""

    module: Callable[[], torch.nn.Module | None]
    """A weak reference to the module."""
    read: Callable[[dict[str, Any]], Any]
    """Reads the attributes from the module's ``__dict__``."""
    traced: Any
    """What ``read`` gave while tracing."""

    def current(self) -> Any:
        """The attributes now (as traced if the module is gone: a view of the module that bent
        weights replaced since)."""
        module = self.module()
        if module is None:
            return self.traced
        try:
            return self.read(vars(module))
        except KeyError:  # an attribute deleted since
            return _GONE


def runs_user_code(module: torch.nn.Module) -> bool:
    """Whether ``module``'s ``forward`` is user code (PyTorch's own containers read no plain
    attribute of theirs)."""
    code = getattr(type(module).forward, "__code__", None)
    return code is not None and is_user_file(code.co_filename)


def module_state(modules: Iterable[torch.nn.Module]) -> tuple[ModuleState, ...]:
    """The plain attributes of ``modules``, as they are now."""
    states = []
    for m in modules:
        keys = [k for k, v in vars(m).items() if k not in _INTERNALS and is_plain(v)]
        read = operator.itemgetter(*keys) if keys else (lambda d: ())
        states.append(ModuleState(weakref.ref(m), read, read(vars(m))))
    return tuple(states)
