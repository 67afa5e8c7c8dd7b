"""Comparing the nested outputs of third-party models (ModelOutputs, tuples, dataclasses)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch


def tensors(out: Any) -> list[torch.Tensor]:
    """Every tensor in ``out``, in order: through mappings, sequences and dataclasses."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, Mapping):
        return [t for v in out.values() for t in tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors(v)]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return [t for f in dataclasses.fields(out) for t in tensors(getattr(out, f.name))]
    return []


def same(got: Any, expected: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Whether the tensors of two outputs have the same shapes, and values within tolerance."""
    a, b = tensors(got), tensors(expected)
    return len(a) == len(b) > 0 and all(
        x.shape == y.shape
        and x.dtype == y.dtype
        and torch.allclose(x.float(), y.float(), atol=atol, rtol=rtol, equal_nan=True)
        for x, y in zip(a, b)
    )


def identical(got: Any, expected: Any) -> bool:
    """Whether the tensors of two outputs are equal bit for bit."""
    a, b = tensors(got), tensors(expected)
    return len(a) == len(b) > 0 and all(
        x.shape == y.shape and torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(a, b)
    )
