"""Seeded callbacks: random state drawn from a seed, derived again from live arguments."""

from __future__ import annotations

import torch

from ..controls import Control
from .argument import Argument
from .base import BendingCallback

__all__ = ["Seeded"]


class Seeded(BendingCallback):
    """Base of callbacks whose state is a random draw (a mask, a permutation, noise).

    ``register_target`` draws, for each target, from ``seed`` (mixed with the target's name:
    ``target_generator(self.seed, name)``) and then calls :meth:`derive`, which builds what
    the callback applies from that draw and the current arguments. When an argument declared
    with ``derives=True`` changes, the draws are redone (:meth:`redraw`) only if the seed
    changed; otherwise :meth:`derive` runs again, so that raising a ``prob`` keeps what was
    masked and masks more.

    Args:
        seed: an int makes the draws reproducible; ``None`` draws from torch's global
            generator. May be an int control.
    """

    seed = Argument(int, none="torch's global random generator", derives=True)

    def __init__(self, seed: int | Control | None = None) -> None:
        super().__init__()
        self.seed = seed
        self._drawn_seed = self.seed

    def derive(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Build target ``name``'s applied state from its draw and the current arguments."""

    def redraw(self) -> None:
        """Draw anew from a new seed: by default, register every target again."""
        super().control_changed()

    def control_changed(self) -> None:
        if self.seed != self._drawn_seed:
            self._drawn_seed = self.seed
            self.redraw()
            return
        for name, (shape, dtype, device) in self._targets.items():
            self.derive(name, shape, dtype, device)
