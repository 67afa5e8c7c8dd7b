"""Named live controls: scalars that push their values into the callback arguments they drive."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

import torch

from .errors import BendingError

__all__ = [
    "BendingParameter",
    "Control",
    "ControlView",
    "Number",
    "Reader",
    "control_of",
    "is_control",
]

Number = float | int | bool


class Reader(Protocol):
    """What a control pushes its values into: a bending callback."""

    def follow(self, control: BendingParameter) -> None:
        """Take the control's new value (and its ramp over the current call)."""


class BendingParameter:
    """A named scalar control (a knob), usable wherever a callback takes a number.

    Arithmetic gives views of the same control, so one knob can drive several callbacks
    differently: ``tb.Scale(2. * p)``, ``tb.Bias(1 - p)``.

    A control pushes its values into the callbacks that read it, its *readers*: a callback
    given the control (or a view of it) attaches itself, and :meth:`set` and :meth:`advance`
    call ``reader.follow(control)`` on each, so that callbacks always hold plain numbers, read
    by the same code eagerly and in TorchScript. Readers are held weakly: a callback that is
    dropped stops following.

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
        self._step = ramp  # at rest: nothing to spread until a change
        self._readers: list[weakref.ref[Reader]] = []

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

    def set(self, value: Number, ramp: bool = True) -> None:
        """Change the value (checked against the range); starts a ramp if ``ramp > 0``,
        unless ``ramp=False`` (a jump: between two sounds, say).

        The readers follow at once (see :meth:`attach`).
        """
        checked = float(self._check(value))
        self._start = self.current_start()
        self._step = 0 if ramp and self.ramp else self.ramp
        self.value = checked
        self._push()

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

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping)."""
        return self.current_start(), self.current_end()

    def advance(self) -> None:
        """Move the ramp on by one call (``BendedModule`` does it after each call); the
        readers follow."""
        if self.ramping():
            self._step += 1
            self._push()

    def finish(self) -> None:
        """End a ramp under way at once: the value is reached; the readers follow."""
        if self.ramping():
            self._step = self.ramp
            self._push()

    # -- readers ---------------------------------------------------------------------------------

    def attach(self, reader: Reader) -> None:
        """Push this control's values into ``reader`` from now on (callbacks attach themselves
        when given the control)."""
        if all(r() is not reader for r in self._readers):
            self._readers.append(weakref.ref(reader))

    def detach(self, reader: Reader) -> None:
        """Stop pushing into ``reader``."""
        self._readers = [r for r in self._readers if r() is not None and r() is not reader]

    def readers(self) -> list[Reader]:
        """The callbacks this control pushes its values into (those still alive)."""
        return [reader for r in self._readers if (reader := r()) is not None]

    @contextlib.contextmanager
    def tensor_input(self, value: torch.Tensor) -> Iterator[None]:
        """Within ``with``, push the 0-dim tensor ``value`` into the readers as the control's
        value, then the control's own value again: what ``torch.export`` traces when the
        control is an input of the exported program. Only arguments read along time (declared
        with ``ramps=True``) take a tensor."""
        saved = self.value
        self.value = value  # type: ignore[assignment]
        try:
            self._push()
            yield
        finally:
            self.value = saved
            self._push()

    def _push(self) -> None:
        for reader in self.readers():
            reader.follow(self)

    def __getstate__(self) -> dict[str, Any]:
        # Weak references neither pickle nor copy; a copied callback attaches itself again to
        # the copy of its control (BendingCallback.__setstate__).
        state = dict(vars(self))
        state["_readers"] = []
        return state

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

    def __repr__(self) -> str:
        args = [repr(self.name), repr(self.get())]
        if self.range is not None:
            args.append(f"range={self.range}")
        if self.clamp:
            args.append("clamp=True")
        if self.ramp:
            args.append(f"ramp={self.ramp}")
        return f"BendingParameter({', '.join(args)})"


class ControlView:
    """``scale * control + offset``: a derived view of a :class:`BendingParameter`."""

    def __init__(self, control: BendingParameter, scale: float = 1.0, offset: float = 0.0) -> None:
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

    def call_range(self) -> tuple[float, float]:
        """Values at the start and at the end of the current call (equal unless ramping)."""
        start, end = self.control.call_range()
        return start * self.scale + self.offset, end * self.scale + self.offset

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


Control = BendingParameter | ControlView
"""A live control, or a view of one, given where a callback takes a number."""


def is_control(value: Any) -> bool:
    """Whether ``value`` is a control or a view of one."""
    return isinstance(value, (BendingParameter, ControlView))


def control_of(value: Control) -> BendingParameter:
    """The control behind ``value`` (itself, or the control a view reads)."""
    return value.control if isinstance(value, ControlView) else value
