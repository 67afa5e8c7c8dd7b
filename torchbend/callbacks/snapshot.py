"""Snapshot: save what a target holds at one call, and crossfade later calls towards it."""

# TorchScript reads the type of the saved tensors' names (``_state_names``, empty before
# anything is saved) only from a class annotation that is a real type, not a string: this is
# why this module, unlike most, does not import ``annotations`` from ``__future__``.

from typing import Any, ClassVar

import torch

from ..controls import BendingParameter, Control, is_control
from ..errors import BendingError
from .argument import Argument
from .base import BendingCallback
from .capture import at_zero, crossfade

__all__ = ["Snapshot", "tiled"]


def tiled(source: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``source`` brought to ``shape`` axis by axis: cropped (its start kept) where it is
    longer, repeated from its start where it is shorter (``[1, 2, 3]`` to 5 gives
    ``[1, 2, 3, 1, 2]``). ``source`` has as many axes as ``shape``, none of size 0 where
    ``shape`` has more than 0."""
    for axis in range(len(shape)):
        size = shape[axis]
        if source.shape[axis] != size:
            index = torch.arange(size, device=source.device)
            source = source.index_select(axis, torch.remainder(index, source.shape[axis]))
    return source


def _saved_key(name: str) -> str:
    # Apart from the target's name, which BendingCallback.unregister frees: a snapshot outlives
    # the bending taken back, until clear().
    return name + " (saved)"


class Snapshot(BendingCallback):
    """Crossfade the target towards a copy of it saved at one call: freeze a moment.

    ``snap.take()`` arms the callback: the next call of each target it bends saves what it
    sees (a detached copy) and passes it through unchanged. Later calls return ``(1 - amount)
    * x + amount * saved``; at ``amount=1`` the target is frozen on the saved copy. Use it as
    ``with snap.take(): model(x)`` to save during the block only; without ``with``, it stays
    armed until each target it bends has been saved once. :meth:`clear` forgets what was
    saved. Tensors may also be given directly, ``Snapshot(saved={"forward:conv": t})``
    (by target name, or by node name for any method).

    The saved tensor is fitted to each call axis by axis: cropped (its start kept) where it
    is longer, *repeated* where it is shorter, so that a snapshot of one block loops over a
    longer call and serves every item of a larger batch (rather than fading towards zeros).

    Before anything is saved for a target, the callback is the identity on it. What was saved
    stays through a bending taken back and given again, until :meth:`clear`.

    Args:
        amount: the share of the saved tensor in the output, from 0 to 1. ``0`` is the
            identity. May be a control; while it ramps, activations get the change spread
            along time.
        saved: tensors to crossfade towards, by target name (``"forward:conv"``,
            ``"conv.weight"``) or node name (``"conv"``); copied.

    Shape:
        - Input: any; a saved tensor has the target's number of axes (and no axis of size 0).
        - Output: same as input.

    Notes:
        Scriptable: a scripted (exported) Snapshot crossfades towards what was saved when it
        was scripted, as buffers; ``take()`` saves in Python only.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Snapshot
        >>> snap = Snapshot(amount=1.0)
        >>> with snap.take():
        ...     snap(torch.tensor([[1.0, 2.0, 3.0]]), "act")
        tensor([[1., 2., 3.]])
        >>> snap(torch.zeros(1, 5), "act")
        tensor([[1., 2., 3., 1., 2.]])
        >>> snap.amount = 0.5
        >>> snap(torch.zeros(1, 2), "act")
        tensor([[0.5000, 1.0000]])
    """

    _state_names: dict[str, str]

    __jit_ignored_attributes__: ClassVar[list[str]] = [
        *BendingCallback.__jit_ignored_attributes__,
        "_taking",
        "_taken",
    ]
    __jit_unused_properties__: ClassVar[list[str]] = ["saved", "taking"]

    amount = Argument(
        float, low=0.0, high=1.0, neutral=0.0, meaning="a share of the saved tensor", ramps=True
    )

    def __init__(
        self, amount: float | Control = 0.0, saved: dict[str, torch.Tensor] | None = None
    ) -> None:
        super().__init__()
        self.amount = amount
        self._taking = False
        self._taken = set[str]()
        owner = type(self).__name__
        if saved is not None and not isinstance(saved, dict):
            raise BendingError(
                f"{owner}: saved must be a dict of tensors by target name, got {saved!r}"
            )
        for name, tensor in (saved or {}).items():
            if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
                raise BendingError(
                    f"{owner}: saved must be a dict of tensors by target name, got "
                    f"{type(tensor).__name__} for {name!r}"
                )
            self.add_state(_saved_key(name), tensor.detach().clone())

    # -- saving ----------------------------------------------------------------------------------

    def take(self) -> "Snapshot":
        """Arm: the next call of each target saves it (usable as a context manager that
        disarms on exit). What was saved of a target is replaced when it is saved again."""
        self._taking = True
        self._taken = set()
        return self

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self._taking = False

    @property
    def taking(self) -> bool:
        """Whether the next call of some target saves it."""
        return self._taking

    def clear(self, name: str | None = None) -> None:
        """Forget what was saved for target ``name`` (as given or saved), or for all."""
        for key in list(self._state_names):
            if name is None or key == _saved_key(name):
                delattr(self, self._state_names.pop(key))
                self.revision += 1

    @property
    def saved(self) -> dict[str, torch.Tensor]:
        """What is saved, by target (or node) name."""
        suffix = len(_saved_key(""))
        return {key[:-suffix]: self.state(key) for key in self._state_names}

    @torch.jit.unused
    def _take(self, x: torch.Tensor, name: str) -> torch.Tensor:
        self.add_state(_saved_key(name), x.detach().clone())
        self._taken.add(name)
        # Armed until each target has been saved (a call without targets: the first one).
        if all(target in self._taken for target in self._targets):
            self._taking = False
        return x

    def register_target(
        self, name: str, shape: torch.Size, dtype: torch.dtype, device: torch.device
    ) -> None:
        key = self._key(name)
        if key:
            saved = self.state(key)
            if saved.dim() != len(shape):
                raise BendingError(
                    f"{self!r} cannot bend '{name}' of shape {list(shape)}: the tensor saved "
                    f"for it has shape {list(saved.shape)}; a snapshot is fitted axis by axis "
                    "and needs as many axes as its target"
                )

    # -- bending ---------------------------------------------------------------------------------

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if not torch.jit.is_scripting():
            if self._taking and name not in self._taken:
                return self._take(x, name)
        return self._crossfade(x, name, self.along("amount", x))

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if not torch.jit.is_scripting():
            if self._taking and name not in self._taken:
                return self._take(weight, name)
        return self._crossfade(weight, name, self.amount)

    def _key(self, name: str) -> str:
        """The key of what is saved for target ``name`` (by its name, else its node's), or
        ``""``."""
        key = _saved_key(name)
        if key in self._state_names:
            return key
        key = _saved_key(name.split(":", 1)[-1])
        if key in self._state_names:
            return key
        return ""

    def _crossfade(self, x: torch.Tensor, name: str, amount: float | torch.Tensor) -> torch.Tensor:
        if at_zero(amount):
            return x
        key = self._key(name)
        if key == "":
            return x
        saved = self.state(key)
        if saved.dim() != x.dim():
            raise BendingError(
                f"{self.label()} holds a tensor of shape {list(saved.shape)} for '{name}', "
                f"which cannot be fitted to a call of shape {list(x.shape)} (another number "
                "of axes)"
            )
        if saved.numel() == 0 and x.numel() != 0:
            raise BendingError(
                f"{self.label()} holds an empty tensor of shape {list(saved.shape)} for "
                f"'{name}', which cannot be repeated to a call of shape {list(x.shape)}"
            )
        fitted = tiled(saved, list(x.shape)).to(dtype=x.dtype, device=x.device)
        return crossfade(x, fitted, amount)

    # -- printing --------------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """``amount`` if not 0, and the shape of each saved tensor (not its values)."""
        shown = []
        amount: Any = self._controlled.get("amount", self.amount)
        if isinstance(amount, BendingParameter):
            shown.append(f"amount={amount.name}")
        elif is_control(amount) or amount != 0.0:
            shown.append(f"amount={amount!r}")
        shapes = {name: list(t.shape) for name, t in self.saved.items()}
        if shapes:
            shown.append(f"saved={shapes}")
        return ", ".join(shown)
