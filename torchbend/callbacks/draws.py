"""Seeded draws per target: each target draws from its own seed, in Python and TorchScript."""

from __future__ import annotations

import zlib

import torch

__all__ = ["draw_key", "mix_seed", "name_crc", "target_generator", "target_seed"]


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
