"""What values a control takes: its settings, the bounds of the arguments it drives, checks."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import BendingError
from .rules import admits, viewed

__all__ = [
    "MAX_RAMP",
    "Bound",
    "Number",
    "check_settings",
    "checked_value",
    "finite_float",
    "interval_text",
    "kind_of",
    "limits_of",
]

Number = float | int | bool
"""A control's value: a float, an int or a bool."""

MAX_RAMP = 1 << 16
"""The longest ramp of a control, in calls: minutes of audio at any usual block size. A longer
one is surely a mistake (a number of samples given for a number of calls, say)."""


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
        return viewed(control_value, self.scale, self.offset)

    def admits(self, control_value: float) -> bool:
        """Whether the argument takes the control's ``control_value``
        (:func:`~torchbend.controls.rules.admits`, which exported modules call too)."""
        return admits(control_value, self.low, self.high, self.finite, self.scale, self.offset)

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


def interval_text(low: float, high: float) -> str:
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


def finite_float(value: Any) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool); else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def limits_of(
    kind: str, range: tuple[Number, Number] | None, bounds: Sequence[Bound]
) -> tuple[float, float]:
    """``(low, high)``: the values of a control of ``kind`` (``"float"``, ``"int"``,
    ``"bool"``) within its ``range`` (``None``: unbounded) that ``bounds`` admit, whole for an
    int control. A control's current value is within them: they meet."""
    low, high = -math.inf, math.inf
    if range is not None:
        low, high = range
    for bound in bounds:
        bound_low, bound_high = bound.interval()
        low, high = max(low, bound_low), min(high, bound_high)
    if kind == "int":
        low = low if math.isinf(low) else math.ceil(low)
        high = high if math.isinf(high) else math.floor(high)
    return low, high


def checked_value(
    value: Any,
    name: str,
    kind: str,
    range: tuple[Number, Number] | None,
    clamp: bool,
    bounds: Sequence[Bound],
) -> float:
    """``value`` as a float, checked for control ``name`` of ``kind``: against its kind, its
    ``range`` and ``bounds`` (brought into them if it ``clamp``s), or a :class:`BendingError`
    that says what the control takes."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    is_bool = isinstance(value, bool)
    if kind == "bool":
        if not (is_bool or (isinstance(value, numbers.Real) and value in (0, 1))):
            raise BendingError(
                f"control {name!r} takes True or False, got {type(value).__name__}: {value!r}"
            )
        return float(value)
    number = None if is_bool else finite_float(value)
    if number is None:
        raise BendingError(
            f"control {name!r} takes a finite {kind}, got {type(value).__name__}: {value!r}"
        )
    if kind == "int" and not number.is_integer():
        raise BendingError(f"control {name!r} takes an int, got {value!r}")
    if range is not None:
        low, high = range
        if not low <= number <= high:
            if not clamp:
                raise BendingError(
                    f"control {name!r}: {value!r} is out of its range [{low}, {high}]"
                )
            number = float(min(max(number, low), high))
    refused = [bound for bound in bounds if not bound.admits(number)]
    if refused and clamp:
        low, high = limits_of(kind, range, bounds)
        return float(min(max(number, low), high))
    if refused:
        bound = refused[0]
        low, high = limits_of(kind, None, [bound])
        raise BendingError(
            f"control {name!r}: {value!r} would make {bound.reader} "
            f"{bound.value(number)!r}, but {bound.requirement}; give {name!r} "
            f"{interval_text(low, high)}, or make the control clamp (clamp=True)"
        )
    return number


def check_settings(name: str, value: Any, range: Any, clamp: Any, ramp: Any) -> None:
    """Refuse settings of a control ``name`` (its initial ``value``, ``range``, ``clamp``,
    ``ramp``) of the wrong type or out of bounds, with a :class:`BendingError`."""
    if not isinstance(name, str) or not name.isidentifier():
        raise BendingError(f"a control's name must be an identifier, got {name!r}")
    if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Real):
        raise BendingError(
            f"control {name!r}: value must be a float, an int or a bool, got "
            f"{type(value).__name__}: {value!r}"
        )
    if range is not None:
        bounds = list(range) if isinstance(range, (tuple, list)) else []
        finite = [finite_float(bound) for bound in bounds]
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
            f"control {name!r}: ramp is a number of calls between 0 and {MAX_RAMP}, got {ramp!r}"
        )


def kind_of(value: Number) -> str:
    """The kind of a control of initial ``value``: ``"float"``, ``"int"`` or ``"bool"``."""
    if isinstance(value, bool):
        return "bool"
    return "int" if isinstance(value, numbers.Integral) else "float"
