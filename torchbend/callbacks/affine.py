"""Affine bendings: add a bias, multiply by a scale, or both."""

from __future__ import annotations

from typing import ClassVar

import torch

from .args import Control, check_number
from .base import BendingCallback

__all__ = ["Affine", "Bias", "Scale"]

# Every callback reads its numeric arguments in ``bend`` in two ways. Eagerly through
# ``self.along(arg, x)``, which gives a number, or a tensor spreading a control's ramp along the
# last (time) axis; when scripted, as the plain number the callback was built with
# (``torch.jit.annotate`` tells TorchScript its type): TorchScript does not compile the branch
# that ``torch.jit.is_scripting()`` rules out, and could not read a live control anyway. The
# public properties read through ``self.value``, which TorchScript cannot compile either, so
# they are listed in ``__jit_unused_properties__``, and ``bend_weight`` has the same two ways
# (``torchbend.export`` compiles it to bend weights again when a control changes).


def add(x: torch.Tensor, bias: float | torch.Tensor) -> torch.Tensor:
    """``x + bias``, exactly ``x`` when ``bias`` is the number 0."""
    if isinstance(bias, torch.Tensor):
        return x + bias
    # Short-circuit rather than add 0.: -0.0 + 0.0 is +0.0, and the identity must be exact.
    if bias == 0.0:
        return x
    return x + bias


def multiply(x: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``x * scale``, exactly ``x`` when ``scale`` is the number 1."""
    if isinstance(scale, torch.Tensor):
        return x * scale
    if scale == 1.0:
        return x
    return x * scale


class Bias(BendingCallback):
    """Add a constant to the target: ``x + bias``.

    Args:
        bias: the constant added, in the target's own units. ``0`` is the identity. May be a
            control; while it ramps, activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Bias
        >>> Bias(0.5)(torch.ones(2), "x")
        tensor([1.5000, 1.5000])
    """

    __jit_unused_properties__: ClassVar[list[str]] = ["bias"]

    def __init__(self, bias: float | Control = 0.0) -> None:
        super().__init__()
        self.number("bias", bias, check_number("Bias", "bias"))

    @property
    def bias(self) -> float:
        """The constant added to the target (a control's current value)."""
        return self.value("bias")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            bias = torch.jit.annotate(float, self._bias)
        else:
            bias = self.along("bias", x)
        return add(x, bias)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            return add(weight, torch.jit.annotate(float, self._bias))
        return add(weight, self.bias)


class Scale(BendingCallback):
    """Multiply the target by a constant: ``x * scale``.

    Args:
        scale: the factor (unitless). ``1`` is the identity, ``-1`` flips the sign. May be a
            control; while it ramps, activations get the change spread along their last axis.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Scale
        >>> Scale(2.0)(torch.ones(2), "x")
        tensor([2., 2.])
    """

    __jit_unused_properties__: ClassVar[list[str]] = ["scale"]

    def __init__(self, scale: float | Control = 1.0) -> None:
        super().__init__()
        self.number("scale", scale, check_number("Scale", "scale"))

    @property
    def scale(self) -> float:
        """The factor the target is multiplied by (a control's current value)."""
        return self.value("scale")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            scale = torch.jit.annotate(float, self._scale)
        else:
            scale = self.along("scale", x)
        return multiply(x, scale)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            return multiply(weight, torch.jit.annotate(float, self._scale))
        return multiply(weight, self.scale)


class Affine(BendingCallback):
    """Scale the target, then add a constant: ``x * scale + bias``.

    Args:
        scale: the factor (unitless). ``1`` leaves the target's amplitude as is.
        bias: the constant added after scaling, in the target's own units.

    With ``scale=1`` and ``bias=0`` the callback is the identity. Both may be controls.

    Shape:
        - Input: any.
        - Output: same as input.

    Example:
        >>> import torch
        >>> from torchbend.callbacks import Affine
        >>> Affine(scale=2.0, bias=-1.0)(torch.tensor([0.0, 1.0, 2.0]), "x")
        tensor([-1.,  1.,  3.])
    """

    __jit_unused_properties__: ClassVar[list[str]] = ["scale", "bias"]

    def __init__(self, scale: float | Control = 1.0, bias: float | Control = 0.0) -> None:
        super().__init__()
        self.number("scale", scale, check_number("Affine", "scale"))
        self.number("bias", bias, check_number("Affine", "bias"))

    @property
    def scale(self) -> float:
        """The factor the target is multiplied by (a control's current value)."""
        return self.value("scale")

    @property
    def bias(self) -> float:
        """The constant added after scaling (a control's current value)."""
        return self.value("bias")

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            scale = torch.jit.annotate(float, self._scale)
            bias = torch.jit.annotate(float, self._bias)
        else:
            scale = self.along("scale", x)
            bias = self.along("bias", x)
        return add(multiply(x, scale), bias)

    def bend_weight(self, weight: torch.Tensor, name: str) -> torch.Tensor:
        if torch.jit.is_scripting():
            scale = torch.jit.annotate(float, self._scale)
            return add(multiply(weight, scale), torch.jit.annotate(float, self._bias))
        return add(multiply(weight, self.scale), self.bias)
