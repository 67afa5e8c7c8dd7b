"""Run the shipped models' DSP kernels compiled by TorchScript when they run eagerly."""

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["eager", "scripted"]


@torch.jit.unused
def eager() -> bool:
    """Whether the caller runs as plain Python (not scripted, not traced by ``torch.export``
    or ``torch.compile``): then the scripted twin of a kernel is the faster choice."""
    return not torch.compiler.is_compiling()


@functools.cache
def scripted(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` compiled by ``torch.jit.script``, once per process.

    The shipped models' analysis and synthesizer are a few dozen small tensor operations a
    frame; run by the TorchScript interpreter they cost about a third less than as Python,
    which is what streaming blocks of 256 samples in real time needs. The plain function is
    what ``torch.jit.script`` of a whole model, ``torch.export`` and the tracer read.
    """
    return torch.jit.script(function)  # type: ignore[no-any-return]
