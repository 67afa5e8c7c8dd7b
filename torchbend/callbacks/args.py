"""Validation of the arguments callbacks share: axes, seeds, numbers, and their reprs."""

from __future__ import annotations

import inspect
import math
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..controls import BendingParameter, ControlView, is_control
from ..errors import BendingError

if TYPE_CHECKING:
    from .base import BendingCallback

__all__ = [
    "Control",
    "as_dim",
    "as_dims",
    "call_axis",
    "check_bool",
    "check_int",
    "check_number",
    "check_seed",
    "draw_key",
    "kept_shape",
    "non_default_arguments",
    "normalized_dim",
    "target_generator",
]

Control = BendingParameter | ControlView
"""A live control, or a view of one, given where a callback takes a number."""


def as_dims(owner: str, dim: int | Sequence[int] | None) -> list[int] | None:
    """Check a ``dim=`` argument and return it as a list of axes (``None``: every axis)."""
    if dim is None:
        return None
    items: list[object] = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    dims = [d for d in items if isinstance(d, int) and not isinstance(d, bool)]
    if len(dims) != len(items):
        raise BendingError(
            f"{owner}: dim must be an int or a tuple of ints (axes, negative counting from "
            f"the end), got {dim!r}"
        )
    return dims


def as_dim(owner: str, dim: int) -> int:
    """Check a ``dim=`` argument that names a single axis."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise BendingError(
            f"{owner}: dim must be an int (an axis, negative counting from the end), got {dim!r}"
        )
    return dim


def normalized_dim(owner: str, dim: int, shape: Sequence[int], name: str) -> int:
    """``dim`` as a non-negative axis of ``shape``, or a :class:`BendingError` naming ``name``."""
    rank = len(shape)
    if not -rank <= dim < rank:
        raise BendingError(
            f"{owner} cannot bend '{name}' of shape {list(shape)}: dim={dim} is out of range; "
            f"give a dim between {-rank} and {rank - 1}"
        )
    return dim + rank if dim < 0 else dim


def call_axis(x: torch.Tensor, dim: int, owner: str, name: str) -> int:
    """``dim`` as a non-negative axis of ``x``, checked when called (scriptable)."""
    rank = x.dim()
    if dim < -rank or dim >= rank:
        raise BendingError(
            f"{owner} cannot bend '{name}': it was called on a tensor of shape {list(x.shape)}, "
            f"which has no axis {dim}"
        )
    return dim + rank if dim < 0 else dim


def kept_shape(shape: list[int], dims: list[int]) -> list[int]:
    """``shape`` with size 1 on every axis not in ``dims`` (negative dims count from the end)."""
    rank = len(shape)
    kept = [1] * rank
    for d in dims:
        if d < -rank or d >= rank:
            raise BendingError(
                f"dim={d} is out of range for a tensor of shape {shape}; "
                f"give a dim between {-rank} and {rank - 1}"
            )
        kept[d] = shape[d]
    return kept


def check_seed(owner: str, seed: int | None) -> int | None:
    """Check a ``seed=`` argument: an int, or ``None`` for the global random generator."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BendingError(
            f"{owner}: seed must be an int (or None for torch's global random generator), "
            f"got {seed!r}"
        )
    return seed


def check_number(
    owner: str,
    arg: str,
    low: float = -math.inf,
    high: float = math.inf,
    meaning: str = "",
) -> Callable[[Any], float]:
    """A check for :meth:`BendingCallback.number`: a finite float in ``[low, high]``.

    ``meaning`` says what the argument is, for the error message ("the probability of
    zeroing an element").
    """

    def check(value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and low <= number <= high):
            what = f"{arg} is {meaning} and must be" if meaning else f"{arg} must be"
            if low == -math.inf and high == math.inf:
                bound = "a finite number"
            elif high == math.inf:
                bound = f"a finite number >= {low:g}"
            elif low == -math.inf:
                bound = f"a finite number <= {high:g}"
            else:
                bound = f"between {low:g} and {high:g}"
            raise BendingError(f"{owner}: {what} {bound}, got {value!r}")
        return number

    return check


def check_int(owner: str, arg: str, low: int = 0, meaning: str = "") -> Callable[[Any], int]:
    """A check for :meth:`BendingCallback.number`: an int ``>= low``."""

    def check(value: Any) -> int:
        # Whole floats pass: a view of an int control (``2 * size``) gives floats.
        whole = isinstance(value, float) and value.is_integer()
        is_int = whole or (isinstance(value, int) and not isinstance(value, bool))
        if not is_int or int(value) < low:
            what = f"{arg} is {meaning} and must be" if meaning else f"{arg} must be"
            raise BendingError(f"{owner}: {what} an int >= {low}, got {value!r}")
        return int(value)

    return check


def check_bool(owner: str, arg: str) -> Callable[[Any], bool]:
    """A check for :meth:`BendingCallback.number`: a bool (or 0 / 1)."""

    def check(value: Any) -> bool:
        if not (isinstance(value, bool) or value in (0, 1)):
            raise BendingError(f"{owner}: {arg} must be True or False, got {value!r}")
        return bool(value)

    return check


def target_generator(seed: int | None, name: str) -> torch.Generator | None:
    """A CPU generator for target ``name`` drawn from ``seed`` (``None``: the global RNG).

    The target's name is mixed into the seed so that each target gets its own draw, the same
    whatever order the targets are registered in.
    """
    if seed is None:
        return None
    return torch.Generator().manual_seed((seed * 0x9E3779B1 + zlib.crc32(name.encode())) % 2**63)


def draw_key(name: str) -> str:
    """Key of the random draw kept for target ``name``, next to the state derived from it.

    Callbacks whose state is derived from a random draw and a live argument (``Mask``: the
    mask from uniform noise and ``prob``) keep the draw under this key, so that a change of
    the argument derives the state again from the same draw instead of drawing anew.
    """
    return f"{name} (draw)"


def _show(value: Any) -> str:
    return value.name if isinstance(value, BendingParameter) else repr(value)


def non_default_arguments(cb: BendingCallback) -> str:
    """``name=value, ...`` for the arguments of ``cb`` that differ from their defaults.

    Controls are always shown (a :class:`BendingParameter` by its name).
    """
    parameters = inspect.signature(type(cb).__init__).parameters
    shown = []
    for name, value in cb.arguments().items():
        default = parameters[name].default
        if is_control(value) or default is inspect.Parameter.empty or value != default:
            shown.append(f"{name}={_show(value)}")
    return ", ".join(shown)
