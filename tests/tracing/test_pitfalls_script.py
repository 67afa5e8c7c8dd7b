"""Pitfalls of TorchScript files with control flow: branches on None-ness, on sizes and on
data, and loops over sizes, each called with other sizes and kinds: equal eager or raise."""

from __future__ import annotations

import io
from typing import Optional

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.tracing.test_pitfalls import check_calls


class OnNone(nn.Module):
    """Branches on whether the state is given, as a scripted LSTM cell does."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    # TorchScript's own spelling of an optional argument, as library files have it
    def forward(self, x: torch.Tensor, h: Optional[torch.Tensor] = None) -> torch.Tensor:  # noqa: UP045
        if h is None:
            h = torch.zeros_like(x)
        return self.lin(x) + h


class OnSize(nn.Module):
    """Branches on a size and on the rank of its input."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 1:
            x = x.unsqueeze(0)
        if x.size(0) > 2:
            x = x * 2.0
        return self.lin(x)


class LoopOverSize(nn.Module):
    """Loops over the first size, keeping a list of results and the sizes it read."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = list(x.shape)
        last = shape.pop()
        outs: list[torch.Tensor] = []
        for i in range(x.size(0)):
            outs.append(self.lin(x[i]) * float(i + 1))
        return torch.stack(outs).reshape(shape + [last])  # noqa: RUF005 (TorchScript takes no *)


class OnData(nn.Module):
    """Branches on the sign of its input's sum: tensor data, which no size decides."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if bool(y.sum() > 0):
            y = y * 2.0
        return y


class LoopOnData(nn.Module):
    """Turns as many times as its input's first value says: tensor data sets the count."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(int(x[0, 0].abs().item() * 3.0)):
            x = self.lin(x)
        return x


def _scripted(cls: type[nn.Module]) -> nn.Module:
    return torch.jit.script(cls())


def test_a_branch_on_none():
    x = torch.randn(2, 4)
    check_calls(
        lambda: _scripted(OnNone),
        {"x": x, "h": torch.randn(2, 4)},
        {"x": torch.randn(3, 4), "h": torch.randn(3, 4)},
        {"x": x, "h": None},
        {"x": x},
    )


def test_a_branch_on_sizes():
    check_calls(
        lambda: _scripted(OnSize),
        {"x": torch.randn(2, 4)},
        {"x": torch.randn(3, 4)},
        {"x": torch.randn(1, 4)},
        {"x": torch.randn(4)},
    )


def test_a_loop_over_a_size():
    check_calls(
        lambda: _scripted(LoopOverSize),
        {"x": torch.randn(2, 4)},
        {"x": torch.randn(3, 4)},
        {"x": torch.randn(1, 4)},
        {"x": torch.randn(2, 4)},
    )


def test_a_branch_on_data_is_never_baked():
    """Refused with a torchbend error (torch's converter takes no such branch), or right."""
    x = torch.ones(2, 4)
    try:
        check_calls(lambda: _scripted(OnData), {"x": x}, {"x": -x}, {"x": torch.randn(3, 4)})
    except tb.TracingError as e:
        assert "tensor data" in str(e)


def test_a_loop_on_data_is_never_baked():
    """Its count read from data: refused, never unrolled for the example's count."""
    x = torch.ones(2, 4)
    try:
        check_calls(lambda: _scripted(LoopOnData), {"x": x}, {"x": x * 0.1})
    except tb.TracingError as e:
        assert "LoopOnData" in str(e)


def test_the_decisions_are_named_as_facts():
    b = tb.BendedModule(_scripted(LoopOverSize))
    b.trace(x=torch.randn(2, 4))
    assert ("x", "shape", 0) in b.graph().guard_facts  # the number of turns
    x = torch.randn(5, 4)
    assert torch.equal(b(x=x), b.module(x))  # another number of turns: traced again
    assert len(b.graphs()) == 2


def test_a_file_round_trip_traces_with_names_from_its_paths():
    buffer = io.BytesIO()
    torch.jit.save(_scripted(LoopOverSize), buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer)
    b = tb.BendedModule(loaded)
    x = torch.randn(3, 4)
    b.trace(x=x)
    assert torch.equal(b(x=x), loaded(x))
    assert any(n.startswith("lin") for n in b.activation_names())


@pytest.mark.parametrize("hx", [None, "given"])
def test_a_scripted_lstm_cell(hx):
    torch.manual_seed(0)
    cell = torch.jit.script(nn.LSTMCell(4, 4))
    x = torch.randn(2, 4)
    state = None if hx is None else (torch.randn(2, 4), torch.randn(2, 4))
    b = tb.BendedModule(cell)
    b.trace(input=x, hx=state)
    for got, want in zip(b(x, state), cell(x, state)):
        assert torch.allclose(got, want, atol=1e-6)
