"""Checks of the structural arguments callbacks share (axes), and seeded draws per target."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch

from ..errors import BendingError

__all__ = [
    "as_dim",
    "as_dims",
    "call_axis",
    "draw_key",
    "kept_shape",
    "mix_seed",
    "name_crc",
    "normalized_dim",
    "target_generator",
    "target_seed",
]


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


def target_generator(seed: int | None, name: str) -> torch.Generator | None:
    """A CPU generator for target ``name`` drawn from ``seed`` (``None``: the global RNG).

    The target's name is mixed into the seed so that each target gets its own draw, the same
    whatever order the targets are registered in.
    """
    mixed = target_seed(seed, name)
    return None if mixed is None else torch.Generator().manual_seed(mixed)


def target_seed(seed: int | None, name: str) -> int | None:
    """The seed of :func:`target_generator` (``None`` for ``None``)."""
    if seed is None:
        return None
    return mix_seed(seed, name_crc(name))


def name_crc(name: str) -> int:
    """The CRC-32 of target ``name`` that :func:`mix_seed` mixes into a seed (computed in
    Python, where targets are registered: TorchScript has no ``zlib``)."""
    return zlib.crc32(name.encode())


def mix_seed(seed: int, crc: int) -> int:
    """``seed`` mixed with a target's :func:`name_crc`: ``(seed * 0x9E3779B1 + crc) % 2**63``,
    the same in Python and in TorchScript (scriptable).

    Python's ints do not overflow and TorchScript's are of 64 bits, which wrap: the two
    differ by a multiple of 2**64, so their low 63 bits, which the mask keeps, are equal (and
    are the remainder modulo 2**63 of Python's, negative seeds included).
    """
    return (seed * 0x9E3779B1 + crc) & 0x7FFFFFFFFFFFFFFF


def draw_key(name: str) -> str:
    """Key of the random draw kept for target ``name``, next to the state derived from it.

    Callbacks whose state is derived from a random draw and a live argument (``Mask``: the
    mask from uniform noise and ``prob``) keep the draw under this key, so that a change of
    the argument derives the state again from the same draw instead of drawing anew.
    """
    return f"{name} (draw)"
