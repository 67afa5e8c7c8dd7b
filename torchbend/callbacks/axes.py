"""Checks of the axes callbacks take (``dim=``), at construction, registration and call."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import BendingError

__all__ = ["as_dim", "as_dims", "call_axis", "check_axes", "kept_shape", "normalized_dim"]


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


def check_axes(owner: str, name: str, shape: Sequence[int], dims: list[int] | None) -> None:
    """Refuse target ``name`` of ``shape`` if it lacks an axis of ``dims`` (``None``: every
    axis, which any shape has), with an error naming callback ``owner`` (its repr) and the
    target."""
    if dims is not None:
        try:
            kept_shape(list(shape), dims)
        except BendingError as e:
            raise BendingError(f"{owner} cannot bend '{name}': {e}") from None
