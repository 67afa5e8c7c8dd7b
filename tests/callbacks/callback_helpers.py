"""Helpers shared by the callback tests."""

from __future__ import annotations

import torch

from torchbend.callbacks import BendingCallback

CPU = torch.device("cpu")
ACT = "forward:conv"
WEIGHT = "conv.weight"


def registered(
    cb: BendingCallback, shape: list[int], name: str = ACT, dtype: torch.dtype = torch.float32
) -> BendingCallback:
    """``cb`` with its state allocated for target ``name`` of ``shape``."""
    cb.register_target(name, torch.Size(shape), dtype, CPU)
    return cb


def signed_randn(*shape: int) -> torch.Tensor:
    """Random values with a -0.0 first, which a sloppy identity would turn into +0.0."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    x.view(-1)[0] = -0.0
    return x


def bits(x: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float32 tensor, to compare outputs bit for bit."""
    return x.view(torch.int32)
