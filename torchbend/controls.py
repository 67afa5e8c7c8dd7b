"""Named live controls: scalars that push their values into the callback arguments they drive."""

from __future__ import annotations

import contextlib
import math
import numbers
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .errors import BendingError

__all__ = [
    "MAX_RAMP",
    "BendingParameter",
    "Bound",
    "Control",
    "ControlView",
    "Number",
    "Reader",
    "control_of",
    "is_control",
]

Number = float | int | bool

MAX_RAMP = 1 << 16
"""The longest ramp of a control, in calls: minutes of audio at any usual block size. A longer
one is surely a mistake (a number of samples given for a number of calls, say)."""


class Reader(Protocol):
    """What a control pushes its values into: a bending callback."""

    def follow(self, control: BendingParameter) -> None:
        """Take the control's new value (and its ramp over the current call)."""


@dataclass(frozen=True, eq=False)
class Bound:
    """What an argument driven by a control takes of the control's values: those for which
    ``scale * value + offset`` (the argument's value, read through a view) is finite (if
    ``finite``) and within ``[low, high]``.

    An :class:`~torchbend.callbacks.Argument` given a control makes one and hands it to the
    control (:meth:`BendingParameter.restrict`), so that the control refuses values the
    argument would not take, or clamps them if it clamps.
    """

    reader: str
    """The argument, as errors name it: ``"Noise.std"``."""
    requirement: str
    """What the argument takes, as errors say it: ``"std must be a finite number >= 0"``."""
    low: float | None = None
    high: float | None = None
    finite: bool = True
    scale: float = 1.0
    offset: float = 0.0

    def value(self, control_value: float) -> float:
        """The argument's value when the control has ``control_value``."""
        return control_value * self.scale + self.offset

    def admits(self, control_value: float) -> bool:
        """Whether the argument takes the control's ``control_value``."""
        value = self.value(control_value)
        if math.isnan(value) or (self.finite and math.isinf(value)):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def interval(self) -> tuple[float, float]:
        """``(low, high)``: the control's values that the argument takes (bounds included)."""
        if self.scale == 0.0:  # the argument holds the offset, whatever the control's value
            return -math.inf, math.inf
        if self.scale == 1.0 and self.offset == 0.0:  # exact, for the bounds of 64-bit ints
            return (
                -math.inf if self.low is None else self.low,
                math.inf if self.high is None else self.high,
            )
        if self.scale < 0:  # a reversed view: the argument's high bound is the control's low
            low = -math.inf if self.high is None else (self.high - self.offset) / self.scale
            high = math.inf if self.low is None else (self.low - self.offset) / self.scale
            return low, high
        low = -math.inf if self.low is None else (self.low - self.offset) / self.scale
        high = math.inf if self.high is None else (self.high - self.offset) / self.scale
        return low, high


def _interval_text(low: float, high: float) -> str:
    """``"a value >= 0"``: the values between ``low`` and ``high``, for errors."""

    def show(number: float) -> str:
        return str(number) if isinstance(number, int) else f"{number:g}"

    if math.isinf(low) and math.isinf(high):
        return "another value"
    if math.isinf(high):
        return f"a value >= {show(low)}"
    if math.isinf(low):
        return f"a value <= {show(high)}"
    return f"a value between {show(low)} and {show(high)}"


def _finite_float(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool); else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


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
        range: ``(low, high)`` bounds of the value, two finite numbers, or ``None`` for no
            bounds. The arguments the control drives bound it too, through the views that
            drive them: a control driving ``Mask(prob=2 * p)`` takes values from 0 to 0.5.
        clamp: bring values out of range, or out of the bounds of the arguments the control
            drives, into them instead of refusing them.
        ramp: number of calls over which a change is spread (``0``: at once; at most
            :data:`MAX_RAMP`). Activation callbacks see a ramp along the last (time) axis of
            each activation, so a jump from 0 to 1 between two audio blocks does not click;
            weight bendings crossfade from the old to the new bent weights over the same
            number of calls.

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
        if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Real):
            raise BendingError(
                f"control {name!r}: value must be a float, an int or a bool, got "
                f"{type(value).__name__}: {value!r}"
            )
        if range is not None:
            bounds = list(range) if isinstance(range, (tuple, list)) else []
            finite = [_finite_float(bound) for bound in bounds]
            if len(finite) != 2 or None in finite:
                raise BendingError(
                    f"control {name!r}: range is (low, high), two finite numbers, or None; "
                    f"got {range!r}"
                )
            if not bounds[0] <= bounds[1]:
                raise BendingError(f"control {name!r}: range {range} has low > high")
        if not isinstance(clamp, bool):
            raise BendingError(f"control {name!r}: clamp is True or False, got {clamp!r}")
        if isinstance(ramp, bool) or not isinstance(ramp, int) or not 0 <= ramp <= MAX_RAMP:
            raise BendingError(
                f"control {name!r}: ramp is a number of calls between 0 and {MAX_RAMP}, "
                f"got {ramp!r}"
            )
        self.name: str = name
        self.kind: str = "bool" if isinstance(value, bool) else "float"
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            self.kind = "int"
        self.range: tuple[Number, Number] | None = None if range is None else (range[0], range[1])
        self.clamp: bool = clamp
        self.ramp: int = ramp
        self._bounds: list[weakref.ref[Bound]] = []
        self.value: float = self._check(value)
        self._start: float = self.value
        self._step: int = ramp  # at rest: nothing to spread until a change
        self._readers: list[weakref.ref[Reader]] = []

    def _check(self, value: Any) -> float:
        """``value`` as a float, checked against the control's kind, its range and the bounds
        of the arguments it drives (brought into them if the control clamps)."""
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        is_bool = isinstance(value, bool)
        if self.kind == "bool":
            if not (is_bool or (isinstance(value, numbers.Real) and value in (0, 1))):
                raise BendingError(
                    f"control {self.name!r} takes True or False, got {type(value).__name__}: "
                    f"{value!r}"
                )
            return float(value)
        number = None if is_bool else _finite_float(value)
        if number is None:
            raise BendingError(
                f"control {self.name!r} takes a finite {self.kind}, got "
                f"{type(value).__name__}: {value!r}"
            )
        if self.kind == "int" and not number.is_integer():
            raise BendingError(f"control {self.name!r} takes an int, got {value!r}")
        if self.range is not None:
            low, high = self.range
            if not low <= number <= high:
                if not self.clamp:
                    raise BendingError(
                        f"control {self.name!r}: {value!r} is out of its range [{low}, {high}]"
                    )
                number = float(min(max(number, low), high))
        refused = [bound for bound in self.bounds() if not bound.admits(number)]
        if refused and self.clamp:
            low, high = self._limits(self.bounds())
            return float(min(max(number, low), high))
        if refused:
            bound = refused[0]
            low, high = self._limits([bound], ranged=False)
            raise BendingError(
                f"control {self.name!r}: {value!r} would make {bound.reader} "
                f"{bound.value(number)!r}, but {bound.requirement}; give {self.name!r} "
                f"{_interval_text(low, high)}, or make the control clamp (clamp=True)"
            )
        return number

    def limits(self) -> tuple[float, float]:
        """``(low, high)``: the values this control takes, within its range and the bounds of
        the arguments it drives (where a control that clamps brings other values)."""
        return self._limits(self.bounds())

    def _limits(self, bounds: list[Bound], ranged: bool = True) -> tuple[float, float]:
        """``(low, high)``: the values of the control that ``bounds`` admit (and its range, if
        ``ranged``), whole for an int control. The current value is within them: they meet."""
        low, high = -math.inf, math.inf
        if ranged and self.range is not None:
            low, high = self.range
        for bound in bounds:
            bound_low, bound_high = bound.interval()
            low, high = max(low, bound_low), min(high, bound_high)
        if self.kind == "int":
            low = low if math.isinf(low) else math.ceil(low)
            high = high if math.isinf(high) else math.floor(high)
        return low, high

    def get(self) -> Number:
        """The current value, of the control's kind."""
        if self.kind == "int":
            return int(self.value)
        if self.kind == "bool":
            return bool(self.value)
        return self.value

    def set(self, value: Number, ramp: bool = True) -> None:
        """Change the value; starts a ramp if ``ramp > 0``, unless ``ramp=False`` (a jump:
        between two sounds, say).

        The value must be of the control's kind, finite, within its range and within the
        bounds of the arguments it drives (see :meth:`restrict`); a control that clamps brings
        it into them, any other raises a :class:`BendingError` and keeps its value. The
        readers follow at once (see :meth:`attach`).
        """
        checked = self._check(value)
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

    def restrict(self, bound: Bound) -> None:
        """Take from now on only values that ``bound`` admits (clamp into it, if the control
        clamps), for as long as something else holds ``bound``.

        Notes:
            The control holds ``bound`` weakly, as it holds its readers: the callback whose
            argument it bounds holds it, so that the bound goes when the callback does, or
            when the argument is given something else. A bound that nothing holds is gone at
            once. Copies of a callback hold copies of its bounds, which the copies of its
            controls take (see :meth:`__getstate__`).
        """
        if not bound.admits(self.value):
            raise BendingError(
                f"control {self.name!r}: its value {self.get()!r} would make {bound.reader} "
                f"{bound.value(self.value)!r}, but {bound.requirement}"
            )
        self._bounds = [b for b in self._bounds if b() is not None and b() is not bound]
        self._bounds.append(weakref.ref(bound))

    def bounds(self) -> list[Bound]:
        """The bounds of the arguments this control drives (see :meth:`restrict`)."""
        return [bound for b in self._bounds if (bound := b()) is not None]

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
        # the copy of its control (BendingCallback.__setstate__). Bounds are kept as they are:
        # copied with the callbacks that hold them, the copies are the ones this copy takes
        # (pickle and deepcopy copy an object once); copied alone, nothing holds them.
        state = dict(vars(self))
        state["_readers"] = []
        state["_bounds"] = self.bounds()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        bounds: list[Bound] = state.pop("_bounds", [])
        vars(self).update(state)
        self._bounds = [weakref.ref(bound) for bound in bounds]

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
        if not isinstance(control, BendingParameter):
            raise BendingError(
                f"a control view reads a BendingParameter, got {type(control).__name__}: "
                f"{control!r}"
            )
        for label, number in (("scale", scale), ("offset", offset)):
            if _finite_float(number) is None:
                raise BendingError(
                    f"controls combine with finite numbers only; got {label} "
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
