"""Seeded callbacks: state drawn once per target from a seed, derived again from live arguments."""

from __future__ import annotations

from typing import Any

import torch

from .args import check_seed
from .base import BendingCallback

__all__ = ["Seeded"]


class Seeded(BendingCallback):
    """Base of callbacks whose per-target state is a random draw (a mask, a permutation).

    ``register_target`` draws from ``seed`` (mixed with the target's name) and then calls
    :meth:`derive`, which builds what the callback applies from that draw and the current
    arguments. When a control changes, the draw is redone only if the seed changed; otherwise
    :meth:`derive` runs again, so raising a ``prob`` keeps what was masked and masks more.
    """

    def seeded(self, owner: str, seed: Any) -> None:
        """Keep ``seed`` (an int, a control, or ``None`` for torch's global generator)."""
        self.number("seed", seed, lambda s: check_seed(owner, s))
        self._drawn_seed = self.seed

    @property
    def seed(self) -> int | None:
        """Seed of the draws (a control's current value)."""
        seed = self.value("seed")
        return None if seed is None else int(seed)

    def derive(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        """Build target ``name``'s applied state from its draw and the current arguments."""

    def control_changed(self) -> None:
        if self.seed != self._drawn_seed:
            self._drawn_seed = self.seed
            super().control_changed()  # draws again, through register_target
            return
        for name, (shape, dtype, device) in self._targets.items():
            self.derive(name, shape, dtype, device)
