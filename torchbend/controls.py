"""Named live controls: scalars that drive callback arguments while the model runs."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .errors import BendingError

__all__ = ["BendingParameter", "ControlView", "Number", "current", "is_control"]

Number = float | int | bool


class BendingParameter(nn.Module):
    """A named scalar control (a knob), usable wherever a callback takes a number.

    Arithmetic gives views of the same control, so one knob can drive several callbacks
    differently: ``tb.Scale(2. * p)``, ``tb.Bias(1 - p)``.

    Args:
        name: the control's name, as used by ``bended.update(name, value)`` (an identifier).
        value: initial value: a float, an int or a bool (the kind is kept on update).
        range: ``(low, high)`` bounds of the value, or ``None`` for no bounds.
        clamp: bring out-of-range values into range instead of refusing them.
        ramp: number of calls over which a change is spread (``0``: at once). Activation
            callbacks see a ramp along the last (time) axis of each activation, so a jump
            from 0 to 1 between two audio blocks does not click; weight bendings crossfade
            from the old to the new bent weights over the same number of calls.

    Example:
        >>> import torchbend as tb
        >>> p = tb.BendingParameter("gain", 0.5, range=(0., 1.))
        >>> (2 * p).get(), (1 - p).get()
        (1.0, 0.5)
        >>> p.set(0.8); (2 * p).get()
        1.6
    """

    def __init__(
        self,
        name: str,
        value: Number,
        range: tuple[Number, Number] | None = None,
        clamp: bool = False,
        ramp: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(name, str) or not name.isidentifier():
            raise BendingError(f"a control's name must be an identifier, got {name!r}")
        if isinstance(value, torch.Tensor) or not isinstance(value, (int, float, bool)):
            raise BendingError(
                f"control {name!r}: value must be a float, an int or a bool, got "
                f"{type(value).__name__}: {value!r}"
            )
        if range is not None:
            low, high = range
            if not low <= high:
                raise BendingError(f"control {name!r}: range {range} has low > high")
        if not isinstance(ramp, int) or ramp < 0:
            raise BendingError(f"control {name!r}: ramp is a number of calls >= 0, got {ramp!r}")
        self.name = name
        self.kind = type(value).__name__
        self.range = None if range is None else (range[0], range[1])
        self.clamp = clamp
        self.ramp = ramp
        self.value = float(self._check(value))
        self._start = self.value
        self._step = 0

    def _check(self, value: Any) -> Number:
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            if not (isinstance(value, bool) and self.kind == "bool"):
                raise BendingError(
                    f"control {self.name!r} takes a {self.kind}, got {type(value).__name__}: "
                    f"{value!r}"
                )
        if self.kind == "int" and float(value) != int(value):
            raise BendingError(f"control {self.name!r} takes an int, got {value!r}")
        if self.range is not None:
            low, high = self.range
            if not low <= value <= high:
                if not self.clamp:
                    raise BendingError(
                        f"control {self.name!r}: {value!r} is out of its range [{low}, {high}]"
                    )
                value = min(max(value, low), high)
        return value

    def get(self) -> Number:
        """The current value, of the control's kind."""
        if self.kind == "int":
            return int(self.value)
        if self.kind == "bool":
            return bool(self.value)
        return self.value

    def set(self, value: Number) -> None:
        """Change the value (checked against the range); starts a ramp if ``ramp > 0``."""
        checked = float(self._check(value))
        self._start = self.current_start()
        self._step = 0 if self.ramp else self.ramp
        self.value = checked

    # -- ramps ---------------------------------------------------------------------------------

    def ramping(self) -> bool:
        """Whether a change is still being spread over calls."""
        return self._step < self.ramp

    def current_start(self) -> float:
        """Value at the start of the current call (the ramp's position)."""
        if not self.ramping():
            return self.value
        return self._start + (self.value - self._start) * self._step / self.ramp

    def current_end(self) -> float:
        """Value at the end of the current call."""
        if not self.ramping():
            return self.value
        return self._start + (self.value - self._start) * (self._step + 1) / self.ramp

    def advance(self) -> None:
        """Move the ramp on by one call (``BendedModule`` does it after each call)."""
        if self.ramping():
            self._step += 1

    def along(self, length: int, device: torch.device | None = None) -> float | torch.Tensor:
        """The value over a call: a float, or a ramp of ``length`` steps while ramping."""
        if not self.ramping():
            return self.get()
        a, b = self.current_start(), self.current_end()
        return torch.linspace(a, b, length + 1, device=device)[1:]

    # -- arithmetic: views of the same control ---------------------------------------------------

    def view(self, scale: float = 1.0, offset: float = 0.0) -> ControlView:
        return ControlView(self, scale, offset)

    def __mul__(self, other: float) -> ControlView:
        return self.view().__mul__(other)

    __rmul__ = __mul__

    def __add__(self, other: float) -> ControlView:
        return self.view().__add__(other)

    __radd__ = __add__

    def __sub__(self, other: float) -> ControlView:
        return self.view().__sub__(other)

    def __rsub__(self, other: float) -> ControlView:
        return self.view().__rsub__(other)

    def __neg__(self) -> ControlView:
        return self.view(-1.0)

    def __truediv__(self, other: float) -> ControlView:
        return self.view().__truediv__(other)

    def extra_repr(self) -> str:
        args = [repr(self.name), repr(self.get())]
        if self.range is not None:
            args.append(f"range={self.range}")
        if self.clamp:
            args.append("clamp=True")
        if self.ramp:
            args.append(f"ramp={self.ramp}")
        return ", ".join(args)

    def __repr__(self) -> str:
        return f"BendingParameter({self.extra_repr()})"


class ControlView(nn.Module):
    """``scale * control + offset``: a derived view of a :class:`BendingParameter`."""

    def __init__(self, control: BendingParameter, scale: float = 1.0, offset: float = 0.0) -> None:
        super().__init__()
        for label, number in (("scale", scale), ("offset", offset)):
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise BendingError(
                    f"controls combine with plain numbers only; got {label} "
                    f"{type(number).__name__}: {number!r}"
                )
        self.control = control
        self.scale = float(scale)
        self.offset = float(offset)

    @property
    def name(self) -> str:
        return self.control.name

    def get(self) -> float:
        return self.control.get() * self.scale + self.offset

    def along(self, length: int, device: torch.device | None = None) -> float | torch.Tensor:
        value = self.control.along(length, device)
        return value * self.scale + self.offset

    def ramping(self) -> bool:
        return self.control.ramping()

    def __mul__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale * other, self.offset * other)

    __rmul__ = __mul__

    def __add__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale, self.offset + other)

    __radd__ = __add__

    def __sub__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale, self.offset - other)

    def __rsub__(self, other: float) -> ControlView:
        return ControlView(self.control, -self.scale, other - self.offset)

    def __neg__(self) -> ControlView:
        return ControlView(self.control, -self.scale, -self.offset)

    def __truediv__(self, other: float) -> ControlView:
        return ControlView(self.control, self.scale / other, self.offset / other)

    def __repr__(self) -> str:
        return f"{self.scale} * {self.control.name} + {self.offset}"


def is_control(value: Any) -> bool:
    """Whether ``value`` is a control or a view of one."""
    return isinstance(value, (BendingParameter, ControlView))


def current(value: Number | BendingParameter | ControlView) -> Any:
    """The current value of a callback argument: a number as is, a control's value."""
    if isinstance(value, (BendingParameter, ControlView)):
        return value.get()
    return value
