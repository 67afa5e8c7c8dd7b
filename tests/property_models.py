"""The models of the property-based suite (tests/test_properties.py) and how to feed them.

Four models, each with the name of its input and the input shapes the suite calls it with:
a convolution stack, a model with data-dependent control flow and Python loops over shapes, a
small transformer layer, and the shipped TinyRave.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import torchbend as tb

__all__ = ["MODELS", "ConvStack", "FlowNet", "ModelSpec", "make_input", "pristine"]


class ConvStack(nn.Module):
    """Three convolutions, a batch norm (in eval mode: buffers read, never written) and two
    ``tanh`` layers, every layer a named submodule (so that an eager copy can be bent with
    forward hooks on the same names)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv1d(1, 4, 3, padding=1)
        self.act_in = nn.Tanh()
        self.conv_mid = nn.Conv1d(4, 4, 3, padding=1)
        self.norm = nn.BatchNorm1d(4)
        self.act_mid = nn.Tanh()
        self.conv_out = nn.Conv1d(4, 1, 1)
        with torch.no_grad():
            for buffer, low, high in [("running_mean", -0.5, 0.5), ("running_var", 0.5, 2.0)]:
                self.norm.get_buffer(buffer).uniform_(low, high)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act_in(self.conv_in(x))
        return self.conv_out(self.act_mid(self.norm(self.conv_mid(h))))


class FlowNet(nn.Module):
    """Python loops over shapes and ``if`` on tensor values: what the concrete tracer guards."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv1d(1, 4, 3, padding=1)
        self.blocks = nn.ModuleList([nn.Conv1d(4, 4, 3, padding=1) for _ in range(2)])
        self.norm = nn.GroupNorm(1, 4)
        self.conv_out = nn.Conv1d(4, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for i in range(x.shape[-1] // 16):  # a loop over a shape
            h = h + torch.tanh(self.blocks[i % len(self.blocks)](h))
        if h.mean() > 0:  # a decision on tensor values
            h = self.norm(h) * 0.5
        else:
            h = -h
        if x.shape[0] > 1:  # a decision on a shape
            h = h - h.mean(0, keepdim=True)
        return self.conv_out(h)


def transformer() -> nn.Module:
    torch.manual_seed(2)
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()


def conv_stack() -> nn.Module:
    torch.manual_seed(0)
    return ConvStack().eval()


def flow_net() -> nn.Module:
    torch.manual_seed(1)
    return FlowNet().eval()


def tiny_rave() -> nn.Module:
    return tb.models.load("tiny_rave")


@dataclass(frozen=True)
class ModelSpec:
    """A model of the suite: how to build it, its input's name, the shapes it is called with."""

    name: str
    factory: Callable[[], nn.Module]
    input: str
    shapes: tuple[tuple[int, ...], ...]
    """Input shapes; the first is the one traced first."""
    scale: float = 1.0
    """Standard deviation of the random inputs."""
    value_decisions: bool = False
    """Whether the model takes decisions on tensor values (which exports do not check)."""

    def inputs(self, x: torch.Tensor) -> dict[str, Any]:
        """``x`` by the name of the input, as ``trace`` and ``get_activations`` take it."""
        return {self.input: x}


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("conv", conv_stack, "x", ((1, 1, 16), (2, 1, 16), (1, 1, 24), (3, 1, 8))),
        ModelSpec(
            "flow", flow_net, "x", ((1, 1, 32), (2, 1, 32), (1, 1, 16), (2, 1, 48)), 1.0, True
        ),
        ModelSpec("transformer", transformer, "src", ((2, 5, 8), (1, 3, 8), (2, 1, 8))),
        ModelSpec("tiny_rave", tiny_rave, "x", ((1, 1, 128), (2, 1, 64), (1, 1, 256)), 0.1),
    )
}


@functools.cache
def _pristine(name: str) -> nn.Module:
    return MODELS[name].factory()


def pristine(name: str) -> nn.Module:
    """A fresh copy of model ``name`` (built once, then deep-copied: same weights each time)."""
    return copy.deepcopy(_pristine(name))


def make_input(spec: ModelSpec, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """A random input of ``shape`` for ``spec``, drawn from ``seed`` (never from torch's global
    generator)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator) * spec.scale
