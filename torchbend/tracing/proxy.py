"""Proxies that carry the concrete value computed alongside the symbolic one."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch.fx

if TYPE_CHECKING:
    from .tracer import BendingTracer

__all__ = ["ConcreteAttribute", "ConcreteProxy"]

# Attributes handed to Python as values, like a shape read by ``int``: code passes them to
# functions that take no proxy (``torch.finfo(x.dtype)``, ``torch.iinfo``, ``device.type``).
_CONCRETE_ATTRIBUTES = frozenset(
    {"dtype", "device", "layout", "is_cuda", "is_cpu", "is_meta", "is_sparse", "is_quantized"}
)


class ConcreteProxy(torch.fx.Proxy):
    """A :class:`torch.fx.Proxy` whose node also holds the value computed on example inputs.

    Where plain torch.fx must refuse (``len``, ``range``, ``int``, ``if``), this proxy hands the
    concrete value back to Python and asks its tracer to record the decision and guard it.
    """

    tracer: BendingTracer

    def __getattr__(self, k: str) -> Any:
        if k in _CONCRETE_ATTRIBUTES:
            found, value = self.tracer.read_attribute(self, k)
            if found:
                return value
        return ConcreteAttribute(self, k)

    def __setitem__(self, key: Any, value: Any) -> None:
        # ``y[i] = v`` is an in-place write torch.fx cannot record: record it as a call.
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def __len__(self) -> int:
        return self.tracer.escape(self, "len")

    def __index__(self) -> int:
        return self.tracer.escape(self, "int")

    def __int__(self) -> int:
        return self.tracer.escape(self, "int")

    def __float__(self) -> float:
        return self.tracer.escape(self, "float")

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __format__(self, spec: str) -> str:
        # f-strings in user code (error messages, mostly) show the value on the example inputs.
        return format(self.tracer.value_of(self), spec)


class ConcreteAttribute(torch.fx.proxy.Attribute, ConcreteProxy):
    """Attribute access on a :class:`ConcreteProxy` (``x.shape``), created lazily like fx's."""
