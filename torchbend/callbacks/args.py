"""Validation of the arguments callbacks share: axes (``dim=``) and seeds (``seed=``)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch

from ..errors import BendingError

__all__ = ["as_dims", "check_seed", "kept_shape", "target_generator"]


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


def target_generator(seed: int | None, name: str) -> torch.Generator | None:
    """A CPU generator for target ``name`` drawn from ``seed`` (``None``: the global RNG).

    The target's name is mixed into the seed so that each target gets its own draw, the same
    whatever order the targets are registered in.
    """
    if seed is None:
        return None
    return torch.Generator().manual_seed((seed * 0x9E3779B1 + zlib.crc32(name.encode())) % 2**63)
