"""TensorParameter: a named live control whose value is a vector (per-channel gains, say)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NoReturn

import torch

from ..errors import BendingError
from .parameter import BendingParameter
from .widgets import Widget, resolve_widget

__all__ = ["ControlValue", "TensorParameter", "checked_tensor"]

ControlValue = float | int | bool | torch.Tensor | Sequence[float]
"""What ``bended.update`` takes: a number for a control, a tensor (or a list) for a tensor
control."""


def checked_tensor(value: Any, name: str, length: int | None = None) -> torch.Tensor:
    """``value`` (a tensor of floats, or a list of numbers) as a new 1-D float32 tensor of
    ``length`` finite values, or a :class:`BendingError` naming the control ``name``, what was
    expected and what was got."""
    where = f"tensor control {name!r}"
    expected = "a 1-D tensor of floats" + ("" if length is None else f" of length {length}")
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            raise BendingError(f"{where} takes {expected}, got a {value.dtype} tensor")
        tensor = value.detach().to(device="cpu", dtype=torch.float32)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        numbers = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) != len(value):
            raise BendingError(f"{where} takes {expected} (or a list of numbers), got {value!r}")
        tensor = torch.tensor([float(v) for v in numbers], dtype=torch.float32)
    else:
        raise BendingError(f"{where} takes {expected}, got {type(value).__name__}: {value!r}")
    if tensor.dim() != 1 or tensor.numel() == 0 or (length is not None and len(tensor) != length):
        raise BendingError(f"{where} takes {expected}, got shape {list(tensor.shape)}")
    if not bool(torch.isfinite(tensor).all()):
        raise BendingError(f"{where} takes finite values, got {value!r}")
    return tensor.clone()


class TensorParameter(BendingParameter):
    """A named control whose value is a 1-D tensor of floats of fixed length: a gain per
    channel, a steering direction, a mask over channels. A patch sets it live from a Pd array
    or a Max ``buffer~`` once exported to nn~ (docs/export.md, "Tensor controls").

    It is given where a callback takes a vector: the ``vector`` of :class:`~torchbend.Steer`
    and :class:`~torchbend.Gains`. ``bended.update(name, tensor)`` changes it with no re-trace;
    a value of another length, of ints, or holding NaN or infinities is refused with a
    :class:`BendingError`, and the control keeps its value. It does not ramp, has no range and
    does not combine with numbers (``2 * p`` is refused); hosts that handle numbers only
    (OSC, the studio's forms, sweeps) refuse or leave out tensor controls.

    Args:
        name: the control's name, as used by ``bended.update(name, value)`` (an identifier).
        value: the initial value: a tensor of floats of one axis (any float dtype, kept as
            float32), or a list of numbers; its length is the control's for good.
        widget: how a host should draw it (kind ``"array"``, the only one it takes).

    Example:
        >>> import torch, torchbend as tb
        >>> gains = tb.TensorParameter("gains", torch.zeros(3))
        >>> gains.set([0.5, 0.0, -0.5]); gains.get()
        tensor([ 0.5000,  0.0000, -0.5000])
        >>> gains.set([1.0, 2.0])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        torchbend.errors.BendingError: tensor control 'gains' takes ... of length 3, got shape [2]
    """

    def __init__(
        self,
        name: str,
        value: torch.Tensor | Sequence[float],
        *,
        widget: Widget | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise BendingError(f"a control's name must be an identifier, got {name!r}")
        tensor = checked_tensor(value, name)
        self.name = name
        self.kind = "tensor"
        self.range = None
        self.clamp = False
        self.ramp = 0
        self.widget = resolve_widget(widget, name, self.kind, None)
        self._bounds = []
        self.value = tensor  # type: ignore[assignment]
        self.default: torch.Tensor = tensor.clone()
        """The initial value (what nn~'s ``clear_buffer_attribute`` restores in an export)."""
        self._start = 0.0
        self._step = 0
        self._readers = []

    @property
    def length(self) -> int:
        """The number of values the control holds."""
        return len(self.tensor())

    def tensor(self) -> torch.Tensor:
        """The current value, not a copy (do not modify it in place: :meth:`set` it)."""
        value: torch.Tensor = self.value  # type: ignore[assignment]
        return value

    def get(self) -> torch.Tensor:  # type: ignore[override]
        """A copy of the current value."""
        return self.tensor().clone()

    def set(self, value: Any, ramp: bool = True) -> None:  # type: ignore[override]
        """Change the value (``ramp`` is ignored: a tensor control changes at once); the
        callbacks it drives follow at once. Refused (the value kept): another length, ints,
        NaN or infinite values."""
        self.value = checked_tensor(value, self.name, self.length)  # type: ignore[assignment]
        self._push()

    def call_range(self) -> tuple[float, float]:
        raise BendingError(f"tensor control {self.name!r} has no ramp to read")

    def limits(self) -> tuple[float, float]:
        return -math.inf, math.inf

    def describe(self) -> dict[str, Any]:
        """The control as JSON-able data: ``name``; ``type`` ``"tensor"``; ``length``;
        ``value`` (a list of floats); ``range`` and ``limits`` ``None``; ``clamp``
        ``False``; ``ramp`` ``0``; ``widget``.

        Example:
            >>> import torchbend as tb
            >>> tb.TensorParameter("gains", [0.0, 1.0]).describe()["length"]
            2
        """
        return {
            "name": self.name,
            "type": "tensor",
            "length": self.length,
            "value": [float(v) for v in self.tensor().tolist()],
            "range": None,
            "limits": None,
            "clamp": False,
            "ramp": 0,
            "widget": self.widget.to_dict(),
        }

    def view(self, scale: float = 1.0, offset: float = 0.0) -> NoReturn:
        raise BendingError(
            f"tensor control {self.name!r} does not combine with numbers; set it to the "
            "tensor you need instead"
        )

    def __repr__(self) -> str:
        return f"TensorParameter({self.name!r}, <length {self.length}>)"
