"""What the method table needs of the other parts of the engine, as small protocols: the
engine passes each part its collaborators when it builds it (see
:class:`~torchbend.engine.engine.Engine`; what the weight bank needs,
:class:`~torchbend.engine.weights.WeightBender`, is declared next to it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.fx
from torch import nn

if TYPE_CHECKING:
    from .dispatch import Entry, Method

__all__ = ["EntryHooks", "ModuleSource", "Replayable"]


class Replayable(Protocol):
    """State a call moves on that a run made to trace or to check puts back: a generator, or
    the calls a window counted."""

    def get_state(self) -> Any: ...

    def set_state(self, state: Any, /) -> Any: ...


class EntryHooks(Protocol):
    """What the method table needs of the owner of bendings (a
    :class:`~torchbend.engine.bendings.BendingSet`): what is done with traced graphs."""

    def bend_value(self, method: str, node: torch.fx.Node, value: Any) -> Any:
        """Bend a concrete value while tracing, so decisions are taken on bent activations."""
        ...

    def attach(self, method: Method, entry: Entry) -> None:
        """Match the bendings applied so far on a new graph."""
        ...

    def build(self, method: Method, entry: Entry, module: nn.Module) -> None:
        """Compile ``entry.gm``: the graph with its bending slots, reading its weights from
        ``module`` (the wrapped module with bent weights in place)."""
        ...

    def generators(self) -> list[Replayable]:
        """The random generators bending draws from (besides torch's global one), and other
        state calls move on (calls counted by windows, the callbacks' buffers): what a trace
        puts back."""
        ...


class ModuleSource(Protocol):
    """What the method table needs of the weight bank (a
    :class:`~torchbend.engine.weights.WeightBank`): the module graphs read their weights from."""

    @property
    def bent_module(self) -> nn.Module:
        """The wrapped module as graphs read it: bent weights in place."""
        ...

    def synced_module(self) -> nn.Module:
        """``bent_module``, its copied modules given the attributes of their originals now."""
        ...
