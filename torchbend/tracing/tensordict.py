"""Tracing of tensordict modules: a program over the keys they read and write."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from torch import nn

__all__ = ["TensorDictProgram", "is_tensordict", "is_tensordict_module", "keyword_call"]


def is_tensordict(value: Any) -> bool:
    """Whether ``value`` is a TensorDict or a tensorclass instance (what tensordict calls a
    tensor collection). Without tensordict imported, nothing is one: it is not imported here
    (an optional dependency, slow to import)."""
    tensordict = sys.modules.get("tensordict")
    return tensordict is not None and bool(tensordict.is_tensor_collection(value))


def is_tensordict_module(module: nn.Module) -> bool:
    """Whether ``module`` is a ``tensordict.nn.TensorDictModuleBase`` (without importing it)."""
    return any(
        c.__name__ == "TensorDictModuleBase" and c.__module__.startswith("tensordict")
        for c in type(module).__mro__
    )


def keyword_call(
    module: Any, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], Callable[[Any], Any]] | None:
    """A call of a tensordict module by its in_keys (``module(x=tensor)``, nested keys joined
    by ``_``), as tensordict's dispatch takes it: ``({"tensordict": td}, unpack)``, where
    ``unpack`` turns the TensorDict out into the out_keys' values (one value, or a tuple).
    ``None`` for any other call. ``module`` is a tensordict module."""
    if not kwargs or "tensordict" in kwargs:
        return None
    keys = {"_".join((k,) if isinstance(k, str) else k): k for k in module.in_keys}
    if not set(kwargs) <= set(keys):
        return None
    from tensordict import TensorDict

    td = TensorDict({keys[name]: value for name, value in kwargs.items()}, batch_size=[])
    dest = [k for k in module.out_keys if k != "_"]

    def unpack(out: Any) -> Any:
        values = tuple(out[k] for k in dest)
        return values[0] if len(values) == 1 else values

    return {"tensordict": td}, unpack


def _steps(module: Any) -> list[Any]:
    """The ``TensorDictModule`` leaves of a (possibly nested) ``TensorDictSequential``."""
    if type(module).__name__ == "TensorDictSequential" or (
        hasattr(module, "module") and isinstance(getattr(module, "module", None), nn.ModuleList)
    ):
        return [step for child in module.module for step in _steps(child)]
    return [module]


class TensorDictProgram(nn.Module):
    """Runs a tensordict module as the sequence of its steps, for tracing.

    Each step reads its ``in_keys`` (from the input TensorDict, or from what an earlier step
    wrote), calls its inner module, and its outputs are written to ``out_keys`` of the input
    TensorDict at the end, which is returned, as ``TensorDictModule.forward`` does. The
    program shares its submodules with ``root``, so weight names and module paths are the
    same as in ``root``.
    """

    def __init__(self, root: nn.Module) -> None:
        super().__init__()
        self._modules = root._modules
        self.steps = _steps(root)
        self.__dict__["root_name"] = type(root).__name__

    def forward(self, tensordict: Any) -> Any:
        written: dict[Any, Any] = {}
        for step in self.steps:
            inputs = [written[k] if k in written else tensordict.get(k) for k in step.in_keys]
            outputs = step.module(*inputs)
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            for key, value in zip(step.out_keys, outputs):
                written[key] = value
        for key, value in written.items():
            tensordict.set(key, value)
        return tensordict
