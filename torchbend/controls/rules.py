"""The rules controls follow, as scriptable functions that Python and exported files both call.

A control's ramp, the bounds of the arguments it drives and the conversion of its values into
those arguments are each written once, here: :class:`~torchbend.BendingParameter`,
:class:`~torchbend.controls.Bound` and :class:`~torchbend.callbacks.Argument` call these
functions eagerly, and the methods of an exported module call them scripted
(``torch.jit.script`` compiles them into the file, which then needs no torchbend to run).

Notes:
    The functions take and return plain floats, ints and bools, and do the same float
    operations in the same order as Python: an exported module gives Python's values bit for
    bit (``tests/controls/test_rules.py`` checks each function eager against scripted). A Python
    int given where a float is typed (the 64-bit bounds of an int argument) is compared exactly
    eagerly; scripted, TorchScript compares it as a float, as it did when written inline.
"""

from __future__ import annotations

import math
from typing import List, Optional  # noqa: UP035 (TorchScript)

import torch

__all__ = [
    "admits",
    "bool_argument",
    "bool_from_text",
    "call_range",
    "choice_from_text",
    "fade_weight",
    "float_argument",
    "int_argument",
    "number_from_text",
    "ramp_along",
    "resampled",
    "tensor_from_buffer",
    "viewed",
]

# Optional[...] rather than ``X | None``: TorchScript reads these annotations, and does not
# parse the ``|`` union on every torch version torchbend supports.


def call_range(start: float, value: float, step: int, ramp: int) -> tuple[float, float]:
    """A control's values at the start and at the end of the current call: ``step`` calls
    into a ramp of ``ramp`` calls from ``start`` to ``value`` (``value`` twice at rest, once
    ``step`` reached ``ramp``)."""
    if step >= ramp:
        return value, value
    return (
        start + (value - start) * step / ramp,
        start + (value - start) * (step + 1) / ramp,
    )


def ramp_along(start: float, end: float, x: torch.Tensor) -> torch.Tensor:
    """``x.shape[-1]`` values going from ``start`` (at the start of a call) to ``end`` (its
    last value): what an argument ramping over the call on ``x`` takes along ``x``'s last
    (time) axis, of ``x``'s dtype if it is a float."""
    values = torch.linspace(start, end, x.shape[-1] + 1, device=x.device)[1:]
    if x.is_floating_point():
        return values.to(x.dtype)
    return values


def fade_weight(step: int, ramp: int) -> float:
    """How far a crossfade of bent weights is in the call after ``step`` calls of a ramp of
    ``ramp`` calls: from ``1 / ramp`` (the first call) to 1 (the last)."""
    return float(min(step + 1, ramp)) / ramp


def viewed(value: float, scale: float, offset: float) -> float:
    """``scale * value + offset``: what a view of a control holds (``2 * p``, ``1 - p``)."""
    return value * scale + offset


def admits(
    value: float,
    low: Optional[float],  # noqa: UP045 (TorchScript)
    high: Optional[float],  # noqa: UP045 (TorchScript)
    finite: bool,
    scale: float,
    offset: float,
) -> bool:
    """Whether an argument bounded by ``low`` and ``high`` (inclusive, ``None``: unbounded),
    finite if ``finite``, takes ``value`` of the control that drives it through a view of
    ``scale`` and ``offset``. NaN never passes."""
    argument = viewed(value, scale, offset)
    if math.isnan(argument) or (finite and math.isinf(argument)):
        return False
    if low is not None and argument < low:
        return False
    return high is None or argument <= high


def float_argument(
    value: float,
    low: Optional[float],  # noqa: UP045 (TorchScript)
    high: Optional[float],  # noqa: UP045 (TorchScript)
) -> float:
    """A control's value as a float argument bounded by ``low`` and ``high``, brought into
    them (``None``: unbounded)."""
    # Python's max(value, low) and min(value, high), written so that TorchScript gives the
    # same value too: its min and max differ on signed zeros (min(-0.0, 0.0) is 0.0 there).
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high
    return value


def int_argument(
    value: int,
    low: Optional[int],  # noqa: UP045 (TorchScript)
    high: Optional[int],  # noqa: UP045 (TorchScript)
) -> int:
    """A control's value, made whole, as an int argument bounded by ``low`` and ``high``,
    brought into them (``None``: unbounded)."""
    if low is not None and value < low:  # as float_argument
        value = low
    if high is not None and value > high:
        value = high
    return value


def bool_argument(value: float) -> bool:
    """A control's value as a bool argument: any value but 0 is true."""
    return bool(value)


# -- text from hosts ---------------------------------------------------------------------------
#
# nn~ hands a file's setter the text of what a patch sent: a Pd or Max number arrives formatted
# by C++'s std::to_string ("0.000000", "-2.500000"), a word as it is. The setters of bool and menu
# controls take that text (their attributes are declared as strings) and read it with these.


def number_from_text(text: str) -> Optional[float]:  # noqa: UP045 (TorchScript)
    """The number ``text`` writes in decimal (``"2"``, ``"-2.500000"``, ``".5"``), or ``None``
    for any other text (a word, an exponent, ``"nan"``, an empty string, over 300 digits)."""
    digits = 0
    dots = 0
    for i, c in enumerate(text):
        if c in "+-" and i == 0:
            continue
        if c == ".":
            dots += 1
        elif c in "0123456789":
            digits += 1
        else:
            return None
    # Past 300 digits the number may overflow a double, which TorchScript's float() raises on.
    if digits == 0 or digits > 300 or dots > 1:
        return None
    return float(text)


def bool_from_text(text: str) -> int:
    """A bool control's value from a host's text: 1 (on) for ``true``, ``on``, ``yes`` or any
    number but 0 (a Pd toggle's non-zero value); 0 (off) for ``false``, ``off``, ``no`` or 0;
    -1 (refused) for any other text. Words in any case."""
    word = text.lower()
    if word in ["true", "on", "yes"]:
        return 1
    if word in ["false", "off", "no"]:
        return 0
    number = number_from_text(text)
    if number is None:
        return -1
    return 0 if number == 0.0 else 1


def choice_from_text(text: str, choices: List[str]) -> int:  # noqa: UP006 (TorchScript)
    """A menu control's entry from a host's text: the index of the entry named ``text`` (exact
    case), else of the number ``text`` writes rounded down (``"2.700000"`` selects entry 2, as
    nn~ makes other ints whole); -1 (refused) for any other text or a number outside
    ``[0, len(choices))``."""
    for i, choice in enumerate(choices):
        if choice == text:
            return i
    number = number_from_text(text)
    if number is None or number < 0.0 or number >= len(choices):  # inf as well
        return -1
    index = math.floor(number)
    if index < 0 or index >= len(choices):
        return -1
    return int(index)


def resampled(values: torch.Tensor, length: int) -> torch.Tensor:
    """The 1-D ``values`` resampled linearly to ``length`` values, float32: the first and the
    last values stay first and last, those between are read at evenly spaced positions (a
    single value fills them all); ``values`` itself, as float32, at its own length."""
    flat = values.reshape(-1).to(torch.float32)
    if flat.numel() == length:
        return flat
    if flat.numel() == 1:
        return flat.expand(length).clone()
    return torch.nn.functional.interpolate(
        flat[None, None], size=length, mode="linear", align_corners=True
    )[0, 0]


def tensor_from_buffer(values: torch.Tensor, length: int) -> Optional[torch.Tensor]:  # noqa: UP045 (TorchScript)
    """What a tensor control of ``length`` values takes from a host's buffer (a Pd array, a
    Max ``buffer~``, ``[channels, frames]`` or ``[frames]``): its first channel resampled
    linearly to ``length`` (:func:`resampled`); ``None`` for an empty buffer or one holding
    NaN or infinite values."""
    first = values[0] if values.dim() > 1 else values
    if first.numel() == 0 or not bool(torch.isfinite(first).all()):
        return None
    return resampled(first, length)
