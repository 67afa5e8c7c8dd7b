"""Declared arguments: each numeric argument of a callback is declared once, on its class."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch

from ..controls import (
    BendingParameter,
    Bound,
    Control,
    ControlView,
    TensorParameter,
    control_of,
    is_control,
)
from ..controls.rules import bool_argument, float_argument, int_argument
from ..errors import BendingError

__all__ = ["INT_MAX", "INT_MIN", "NO_NEUTRAL", "Argument", "declared", "pull_control"]

_KINDS: tuple[type, ...] = (float, int, bool)

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
"""The ints an int argument takes beyond its own bounds: those of 64 bits, which TorchScript
and torch (a seed) hold."""


class _NoNeutral:
    def __repr__(self) -> str:
        return "NO_NEUTRAL"


NO_NEUTRAL: Any = _NoNeutral()
"""The ``neutral`` of an argument that makes no callback the identity on its own (a seed)."""

_UNSET = object()


class Argument:
    """A numeric argument of a bending callback, declared once as a class attribute.

    Everything about the argument comes from this declaration: the check of the values given
    to the constructor, the repr, its control support, its ramps, what an export writes when
    its control changes, and the neutral setting the identity test runs the callback at.

    Assigning ``self.<name> = value`` (in ``__init__``, or later) checks a number and keeps it
    as a plain attribute, which ``self.<name>`` reads back, eagerly and in TorchScript alike. A
    :class:`~torchbend.BendingParameter` (or a view of one, ``2 * p``) is checked by its current
    value and then *pushes* its values in: the attribute always holds the control's current
    value, so that ``bend`` never reads a control. The argument gives the control its bounds
    (a :class:`~torchbend.controls.Bound`, which the callback holds): the control refuses
    later values the argument would not take, or brings them into its bounds if it clamps.

    Numbers are real numbers: a string (``'2'``) or a bool is refused where a float or an int
    is meant, and a float must be finite unless declared otherwise; an int is whole (a float
    like ``2.0`` passes) and of 64 bits.

    Args:
        kind: ``float``, ``int`` or ``bool``.
        low: lower bound (inclusive), or ``None``.
        high: upper bound (inclusive), or ``None``.
        neutral: the value at which the argument makes the callback the identity, bit for bit
            (with the callback's other arguments at their neutral values). Leave it out
            (:data:`NO_NEUTRAL`) for an argument that has none on its own, such as a seed.
        none: what ``None`` means, if the argument may be ``None`` (``""`` to allow ``None``
            without mentioning it in errors); ``None``: the argument may not be ``None``.
        meaning: what the argument is, for errors (``"a standard deviation"``).
        ramps: whether ``bend`` reads the argument with :meth:`BendingCallback.along`, so
            that while its control ramps, activations get the change spread along their last
            (time) axis. Floats only.
        derives: whether the callback derives state from the argument (a mask from ``prob``,
            draws from ``seed``): a change calls its :meth:`BendingCallback.control_changed`.
            An exported module's setter calls it too, scripted, for the callbacks that
            subclass :class:`~torchbend.callbacks.seeded.Seeded`; exports refuse a control on
            such an argument of any other callback.
        finite: whether a float must be finite (``Clamp``'s bounds may be infinite); NaN never
            passes.

    Example:
        >>> import torch, torchbend as tb
        >>> from torchbend.callbacks import Argument
        >>> class Gain(tb.BendingCallback):
        ...     gain = Argument(float, low=0.0, neutral=1.0, ramps=True)
        ...
        ...     def __init__(self, gain: float | tb.BendingParameter = 1.0) -> None:
        ...         super().__init__()
        ...         self.gain = gain
        ...
        ...     def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        ...         return x * self.along("gain", x)
        >>> Gain(-1.0)
        Traceback (most recent call last):
        ...
        torchbend.errors.BendingError: Gain: gain must be a finite number >= 0, got -1.0
        >>> knob = tb.BendingParameter("knob", 2.0)
        >>> gain = Gain(knob)
        >>> knob.set(3.0)
        >>> gain.gain, gain
        (3.0, Gain(gain=knob))
        >>> knob.set(-1.0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        torchbend.errors.BendingError: control 'knob': -1.0 would make Gain.gain -1.0, but ...
    """

    def __init__(
        self,
        kind: type,
        *,
        low: float | None = None,
        high: float | None = None,
        neutral: Any = NO_NEUTRAL,
        none: str | None = None,
        meaning: str = "",
        ramps: bool = False,
        derives: bool = False,
        finite: bool = True,
    ) -> None:
        if kind not in _KINDS:
            raise BendingError(f"an Argument is a float, an int or a bool, not {kind!r}")
        if ramps and kind is not float:
            raise BendingError(f"only float arguments ramp along time, not {kind.__name__} ones")
        if kind is bool and (low is not None or high is not None):
            raise BendingError("a bool argument has no bounds")
        self.kind = kind
        # Bounds of the argument's own kind, so that max(value, low) keeps that kind.
        self.low = None if low is None else kind(low)
        self.high = None if high is None else kind(high)
        self.neutral = neutral
        self.none = none
        self.meaning = meaning
        self.ramps = ramps
        self.derives = derives
        self.finite = finite
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        defaults = {"low": None, "high": None, "neutral": NO_NEUTRAL, "none": None}
        defaults.update(meaning="", ramps=False, derives=False, finite=True)
        shown = [self.kind.__name__]
        for key, default in defaults.items():
            value = getattr(self, key)
            if value is not default and value != default:
                shown.append(f"{key}={value!r}")
        return f"Argument({', '.join(shown)})"

    # -- the attribute ---------------------------------------------------------------------------

    def __get__(self, cb: Any, owner: type | None = None) -> Any:
        if cb is None:
            return self
        try:
            return cb.__dict__[self.name]
        except KeyError:
            raise AttributeError(
                f"{type(cb).__name__}.{self.name} was never set: assign "
                f"self.{self.name} = {self.name} in __init__"
            ) from None

    def __set__(self, cb: Any, value: Any) -> None:
        owner = type(cb).__name__
        controlled: dict[str, Control] | None = cb.__dict__.get("_controlled")
        if controlled is None:
            raise BendingError(f"{owner}: call super().__init__() before setting {self.name}")
        if isinstance(value, TensorParameter):
            raise BendingError(
                f"{owner}: {self.name} takes a number or a control of one; {value.name!r} is a "
                "tensor control, which callbacks take where they take a vector (the vector of "
                "Steer and Gains)"
            )
        if is_control(value):
            self.check(owner, value.get())
            number, start, end = self.read(value)
        else:
            number = start = end = self.check(owner, value)
        # The bounds given to controls, held here: a control holds them weakly (Bound).
        bounds: dict[str, Bound] = cb.__dict__.setdefault("_bounds", {})
        bounds.pop(self.name, None)
        previous = controlled.pop(self.name, None)
        if previous is not None and all(
            control_of(other) is not control_of(previous) for other in controlled.values()
        ):
            control_of(previous).detach(cb)
        if is_control(value):
            controlled[self.name] = value
            control = control_of(value)
            control.attach(cb)
            bound = self.bound(owner, value)
            if bound is not None:
                bounds[self.name] = bound
                control.restrict(bound)
        if self.store(cb, number, start, end) and self.derives and cb._targets:
            cb.control_changed()

    # -- values ----------------------------------------------------------------------------------

    def check(self, owner: str, value: Any) -> Any:
        """``value`` checked and converted to the argument's kind, or a :class:`BendingError`
        that names ``owner`` (the callback's class), the argument, its bound and the value."""
        if value is None and self.none is not None:
            return None
        alternative = f" or None ({self.none})" if self.none else ""
        is_real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if self.kind is bool:
            if not (isinstance(value, bool) or (is_real and value in (0, 1))):
                raise BendingError(
                    f"{owner}: {self._must()} True or False{alternative}, got {value!r}"
                )
            return bool(value)
        if self.kind is int:
            # Whole floats pass: a view of an int control (``2 * size``) gives floats.
            whole = isinstance(value, float) and value.is_integer()
            integral = is_real and isinstance(value, numbers.Integral)
            integer = int(value) if whole or integral else None
            least, most = self._int_limits()
            if integer is not None and least <= integer <= most:
                return integer
            if integer is not None and integer > most and self.high is not None:
                bound = f"at most {self.high}"
            elif integer is not None and (integer > most or self.low is None):
                bound = "an int of 64 bits"
            else:
                bound = "an int" if self.low is None else f"an int >= {self.low}"
            raise BendingError(f"{owner}: {self._must()} {bound}{alternative}, got {value!r}")
        try:
            number = float(value) if is_real else math.nan
        except OverflowError:  # an int beyond any float
            number = math.inf
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        if math.isnan(number) or (self.finite and math.isinf(number)) or not low <= number <= high:
            raise BendingError(
                f"{owner}: {self._must()} {self._bound()}{alternative}, got {value!r}"
            )
        return number

    def _must(self) -> str:
        if self.meaning:
            return f"{self.name} is {self.meaning} and must be"
        return f"{self.name} must be"

    def _int_limits(self) -> tuple[int, int]:
        low = INT_MIN if self.low is None else max(int(self.low), INT_MIN)
        high = INT_MAX if self.high is None else min(int(self.high), INT_MAX)
        return low, high

    def _bound(self) -> str:
        if self.kind is int:
            low, high = self._int_limits()
            return f"an int between {low} and {high}"
        number = "a finite number" if self.finite else "a number"
        if self.low is None and self.high is None:
            return number
        if self.high is None:
            return f"{number} >= {self.low:g}"
        if self.low is None:
            return f"{number} <= {self.high:g}"
        return f"between {self.low:g} and {self.high:g}"

    def bound(self, owner: str, source: Control) -> Bound | None:
        """What this argument of a callback of class ``owner`` takes of the values of the
        control behind ``source`` (through its scale and offset, for a view); ``None`` for a
        bool argument, which takes any value."""
        if self.kind is bool:
            return None
        low: float | None = self.low
        high: float | None = self.high
        if self.kind is int:
            low, high = self._int_limits()
        scale, offset = 1.0, 0.0
        if isinstance(source, ControlView):
            scale, offset = source.scale, source.offset
        return Bound(
            reader=f"{owner}.{self.name}",
            requirement=f"{self._must()} {self._bound()}",
            low=low,
            high=high,
            finite=self.finite,
            scale=scale,
            offset=offset,
        )

    def convert(self, value: float) -> Any:
        """A control's value as the argument's kind, brought into its bounds
        (:mod:`torchbend.controls.rules`, which exported modules call too)."""
        if self.kind is bool:
            return bool_argument(float(value))
        if self.kind is int:
            return int_argument(int(value), self.low, self.high)
        return float_argument(float(value), self.low, self.high)

    def read(self, source: Control) -> tuple[Any, Any, Any]:
        """``(value, start, end)``: a control's value and its values at the start and at the
        end of the current call (equal unless it ramps)."""
        value = source.get()
        if isinstance(value, torch.Tensor):  # BendingParameter.tensor_input
            if not self.ramps:
                raise BendingError(
                    f"{self.name} takes numbers, not a tensor input: only arguments read along "
                    "time (declared with ramps=True) can be inputs of an exported program"
                )
            value = value.clamp(self.low, self.high) if self._bounded() else value
            return value, value, value
        start, end = source.call_range()
        return self.convert(value), self.convert(start), self.convert(end)

    def _bounded(self) -> bool:
        return self.low is not None or self.high is not None

    def store(self, cb: Any, value: Any, start: Any, end: Any) -> bool:
        """Keep ``value`` (and for a ramping argument, the call's ``start`` and ``end``) in
        ``cb``; whether the value changed (a tensor input, or its end, changes nothing)."""
        previous = cb.__dict__.get(self.name, _UNSET)
        tensor = isinstance(value, torch.Tensor)
        changed = not (tensor or isinstance(previous, torch.Tensor)) and previous != value
        cb.__dict__[self.name] = value
        cb.revision += 1  # a value (or a control) written: the next call may differ
        if self.ramps:
            if value is None:
                cb._ramps.pop(self.name, None)
            elif tensor:
                cb._ramps[self.name] = (value, value, value)
            else:
                cb._ramps[self.name] = (float(start), float(end), float(value))
        return changed

    def pull(self, cb: Any) -> bool:
        """Read the control that drives this argument of ``cb`` again; whether its value
        changed."""
        return self.store(cb, *self.read(cb._controlled[self.name]))


def pull_control(cb: Any, controlled: Mapping[str, Control], control: BendingParameter) -> bool:
    """Read ``control`` again into the arguments of ``cb`` it drives (those of ``controlled``,
    the arguments given as controls, by name); whether one declared with ``derives=True``
    changed, so that ``cb`` derives its state again."""
    arguments = declared(type(cb))
    derive = False
    for name, source in controlled.items():
        if control_of(source) is control:
            argument = arguments[name]
            changed = argument.pull(cb)
            derive = derive or (changed and argument.derives)
    return derive


_DECLARED: dict[type, dict[str, Argument]] = {}


def declared(cls: type) -> dict[str, Argument]:
    """The arguments declared by ``cls`` and its bases, by name (do not modify the dict)."""
    found = _DECLARED.get(cls)
    if found is None:
        found = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Argument):
                    found[name] = value
        _DECLARED[cls] = found
    return found
