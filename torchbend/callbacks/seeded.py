"""Seeded callbacks: random state drawn from a seed, derived again from live arguments."""

# No ``from __future__ import annotations``: TorchScript reads the types of Drawn's class
# annotations (empty dicts at first) only from real types.

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..controls import Control
from ..errors import BendingError
from .argument import Argument
from .axes import kept_shape
from .base import BendingCallback
from .draws import draw_key, mix_seed, name_crc

__all__ = ["Drawn", "Seeded"]


class Drawn(nn.Module):
    """The targets a :class:`Seeded` callback draws for, in types TorchScript holds.

    A scripted callback cannot read ``_targets`` (shapes of any rank, ``torch.Size``) nor
    compute a CRC-32: this record, kept in step with the registered targets in Python, is
    what its ``control_changed`` loops over, eagerly and in an exported module alike. It is a
    submodule, not annotations of :class:`Seeded`, because TorchScript reads the annotations
    of one class of a module's MRO only, which a subclass with annotations of its own hides.
    """

    targets: dict[str, tuple[list[int], torch.dtype, torch.device]]
    """Each registered target's shape, dtype and device."""
    crcs: dict[str, int]
    """Each registered target's :func:`~torchbend.callbacks.draws.name_crc`."""
    seed: int | None
    """The seed the state was drawn from."""

    def __init__(self, seed: int | None) -> None:
        super().__init__()
        self.targets = {}
        self.crcs = {}
        self.seed = seed


class Seeded(BendingCallback):
    """Base of callbacks whose state is a random draw (a mask, a permutation, noise).

    ``register_target`` checks the target and calls :meth:`draw`, which draws from
    :meth:`generator_for` (``seed`` mixed with the target's name) and then calls
    :meth:`derive`, which builds what the callback applies from that draw and the current
    arguments. When an argument declared with ``derives=True`` changes, the draws are redone
    (:meth:`redraw`) only if the seed changed; otherwise :meth:`derive` runs again, so that
    raising a ``prob`` keeps what was masked and masks more.

    ``control_changed`` and what it calls (``redraw``, ``draw``, ``derive``) are scriptable:
    an exported module's ``set_<control>`` calls it as a control calls it here, and state
    derived again is copied into the buffers kept (see :meth:`add_state`). They loop over
    :attr:`drawn`, the registered targets in types TorchScript holds; shapes are lists of
    ints there (TorchScript has no ``torch.Size``).

    Args:
        seed: an int makes the draws reproducible; ``None`` draws from torch's global
            generator. May be an int control.
    """

    seed = Argument(int, none="torch's global random generator", derives=True)

    def __init__(self, seed: int | Control | None = None) -> None:
        super().__init__()
        self.seed = seed
        self.drawn = Drawn(self.seed)
        """The registered targets, and the seed their state was drawn from."""

    def draw(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        """Draw target ``name``'s random state from :meth:`generator_for`, keep it (with
        :meth:`add_state`) and :meth:`derive` from it. Scriptable, so that an exported module
        draws anew when its seed is set.

        By default, registers the target again (eager only: override it to export a control
        on the seed).
        """
        self._register_again(name, shape, dtype, device)

    @torch.jit.unused
    def _register_again(
        self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device
    ) -> None:
        self.register_target(name, torch.Size(shape), dtype, device)

    def derive(self, name: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
        """Build target ``name``'s applied state from its draw and the current arguments
        (scriptable)."""

    def redraw(self) -> None:
        """Draw anew from a new seed: by default, :meth:`draw` for every target."""
        for name, (shape, dtype, device) in self.drawn.targets.items():
            self.draw(name, shape, dtype, device)

    @torch.jit.export
    def control_changed(self) -> None:
        """:meth:`redraw` if the seed changed, else :meth:`derive` for every registered
        target (exported when scripted: ``set_<control>`` calls it)."""
        if self._seed_changed():
            self.drawn.seed = self.seed
            self.redraw()
            return
        for name, (shape, dtype, device) in self.drawn.targets.items():
            self.derive(name, shape, dtype, device)

    def _seed_changed(self) -> bool:
        # ``seed != drawn`` in terms TorchScript types: ``seed`` is an int or None (the type
        # of its value when scripted), ``drawn`` an Optional[int].
        seed = self.seed
        drawn = self.drawn.seed
        if seed is None:
            return drawn is not None
        return drawn is None or drawn != seed

    def draw_uniform(
        self, name: str, shape: list[int], dims: list[int] | None, device: torch.device
    ) -> None:
        """Keep uniform noise in [0, 1) for target ``name`` under ``draw_key(name)``: one value
        per element of ``shape``, or per slice along ``dims``; from :meth:`generator_for`."""
        size = shape if dims is None else kept_shape(shape, dims)
        noise = torch.rand(size, generator=self.generator_for(name))
        self.add_state(draw_key(name), noise.to(device))

    def generator_for(self, name: str) -> torch.Generator | None:
        """The generator target ``name`` draws from: ``seed`` mixed with its name (see
        :func:`~torchbend.callbacks.draws.target_seed`); ``None`` (torch's global generator)
        without a seed."""
        seed = self.seed
        if seed is None:
            return None
        return torch.Generator().manual_seed(mix_seed(seed, self._crc(name)))

    def _crc(self, name: str) -> int:
        if name in self.drawn.crcs:
            return self.drawn.crcs[name]
        if torch.jit.is_scripting():
            raise BendingError("a scripted callback draws for its registered targets only")
        return name_crc(name)  # a target being registered, or one given to register_target

    # -- the record of targets, in step with _targets ------------------------------------------

    def register(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        try:
            super().register(name, shape, dtype, device)
        finally:
            self._record()

    def unregister(self, name: str) -> None:
        super().unregister(name)
        self._record()

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        super()._apply(fn, recurse)
        self._record()
        return self

    def _record(self) -> None:
        self.drawn.targets = {
            name: (list(shape), dtype, device)
            for name, (shape, dtype, device) in self._targets.items()
        }
        self.drawn.crcs = {name: name_crc(name) for name in self._targets}
