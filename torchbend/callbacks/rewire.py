"""Rewire: feed what reads a node from another activation of the same method."""

# TorchScript reads the type of ``held`` (an empty dict at first) only from a class annotation
# that is a real type, not a string: no ``from __future__ import annotations`` here.

import re

import torch

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback
from .capture import at_zero, crossfade
from .snapshot import tiled

__all__ = ["Rewire"]

_NODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Rewire(BendingCallback):
    """Replace the targets by activation ``source`` of the same call: whatever read a target
    reads ``source`` instead (mixed by ``amount``), as if the graph were wired so.

    ``bended.bend(tb.Rewire("encoder_2"), "encoder_4$")`` feeds the layers after
    ``encoder_4`` with ``encoder_2``. ``source`` must be computed before the targets in the
    method's graph (``bend`` refuses a target that comes first). Where shapes differ,
    ``source`` is fitted to the target's, axis by axis: cropped, or repeated from its start
    (as :class:`Snapshot` does); their ranks must match. ``reset()`` wires the graph back.

    Args:
        source: the name of an activation of the same method (``bended.activation_names()``).
        amount: how much of ``source`` replaces the target: ``0`` is the identity, ``1`` the
            rewiring. May be a control; while it ramps, the change is spread along time.

    Shape:
        - Input: any, of the rank of ``source``.
        - Output: same as input.
    """

    held: dict[str, torch.Tensor]
    """The value of ``source`` in the current call, by method."""

    amount = Argument(float, low=0.0, high=1.0, neutral=0.0, meaning="a mix", ramps=True)

    def __init__(self, source: str, amount: float | Control = 1.0) -> None:
        super().__init__()
        if not isinstance(source, str) or not _NODE.match(source):
            raise BendingError(
                f"Rewire: source is the name of an activation (a node of the traced graph, "
                f"such as 'encoder_2'), got {source!r}"
            )
        self.source = source
        self.amount = amount
        self.held = {}

    def __getstate__(self) -> dict[str, object]:
        # The value held is of the last call only (and may carry autograd history, which
        # cannot be copied): copies and pickles start without one.
        state = dict(super().__getstate__())
        state["held"] = {}
        return state

    def sources(self, method: str) -> str:
        """The pattern selecting the source in ``method`` (``BendedModule.bend`` adds it to
        the bending's, so that the callback sees the source's value first)."""
        return f"{method}:^{self.source}$"

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        colon = name.rfind(":")
        method, node = name[:colon], name[colon + 1 :]
        if node == self.source:
            self.held[method] = x
            return x
        amount = self.along("amount", x)
        if at_zero(amount):
            return x
        if method not in self.held:
            raise BendingError("Rewire: no value of its source before " + name)
        source = self.held[method]
        if source.dim() != x.dim():
            raise BendingError(
                "Rewire cannot feed " + name + " from " + self.source + ": their ranks (numbers "
                "of axes) must match"
            )
        return crossfade(x, tiled(source, list(x.shape)).to(x.dtype), amount)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        return weight  # never called: register_target refuses weights

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        if ":" not in name:
            raise BendingError(
                f"{self!r} cannot bend weight '{name}': Rewire feeds activations from "
                "another activation of the same method"
            )
