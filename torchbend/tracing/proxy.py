"""Proxies that carry the concrete value computed alongside the symbolic one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch.fx

if TYPE_CHECKING:
    from .tracer import BendingTracer

__all__ = ["ConcreteAttribute", "ConcreteProxy"]


class ConcreteProxy(torch.fx.Proxy):
    """A :class:`torch.fx.Proxy` whose node also holds the value computed on example inputs.

    Where plain torch.fx must refuse (``len``, ``range``, ``int``, ``if``), this proxy hands the
    concrete value back to Python and asks its tracer to record the decision and guard it.
    """

    tracer: BendingTracer

    def __getattr__(self, k: str) -> ConcreteAttribute:
        return ConcreteAttribute(self, k)

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


class ConcreteAttribute(torch.fx.proxy.Attribute, ConcreteProxy):
    """Attribute access on a :class:`ConcreteProxy` (``x.shape``), created lazily like fx's."""
