"""Pitfalls: traced values where PyTorch's C code wants real ones.

Legacy constructors (``torch.Tensor([n, m])``, ``torch.FloatTensor([t])``) parse their data
in C, a generator's ``manual_seed`` takes only a real int, and a one-number tensor can size
a factory (``torch.arange(n)``). Each call must equal eager, with other sizes and values.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.tracing.test_pitfalls import check_calls


class LegacySizes(nn.Module):
    def forward(self, x):
        return x * torch.Tensor([x.shape[-1], x.shape[0]]).amax()


class LegacyOfTraced(nn.Module):
    def forward(self, x, t):
        scales = torch.Tensor([v.abs().log1p() for v in x[:, 0]]).view(-1, 1)
        return torch.Tensor(x * 2) + scales * torch.FloatTensor([t]) + torch.LongTensor([2])


def test_legacy_constructors_of_traced_sizes_and_values():
    check_calls(LegacySizes, {"x": torch.randn(2, 3)}, {"x": torch.randn(2, 5)})
    x = torch.randn(3, 2)
    check_calls(
        LegacyOfTraced,
        {"x": x, "t": 0.5},
        {"x": torch.randn(3, 2), "t": 1.5},
        {"x": torch.randn(4, 2), "t": 0.5},
    )


class SeededInForward(nn.Module):
    """A generator made and seeded in forward from an argument (C code takes no proxy)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, seed: int = 3):
        g = torch.Generator().manual_seed(seed * 7 + 1)
        return self.lin(x) + torch.randn(x.shape, generator=g)


class KeptGenerator(nn.Module):
    """A generator kept across calls: each call draws on from where the last one left it."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(0)

    def forward(self, x):
        return x + torch.randn(x.shape, generator=self.generator)


def test_a_seed_computed_from_an_argument_is_a_fact_of_the_graph():
    x = torch.randn(2, 4)
    check_calls(
        SeededInForward,
        {"x": x, "seed": 3},
        {"x": x, "seed": 3},
        {"x": x, "seed": 4},
        {"x": torch.randn(3, 4), "seed": 3},
    )


def test_a_generator_kept_by_the_module_draws_on_at_every_call():
    import torchbend as tb

    module, eager = KeptGenerator(), KeptGenerator()
    bended = tb.BendedModule(module)
    x = torch.zeros(3)
    bended.trace(x=x)
    draws = [bended(x) for _ in range(3)]
    assert all(torch.equal(d, eager(x)) for d in draws)
    assert not torch.equal(draws[0], draws[1])


class SizedByData(nn.Module):
    """Sizes read from a tensor's values (Qwen2.5-Omni's vision positions do so)."""

    def forward(self, grid):
        h = grid[:, 1][0] // 2
        index = torch.arange(grid[0, 0]) * 2
        rows = torch.arange(h).view(1, -1, 1).expand(len(index), -1, grid[0, 2]).flatten()
        return rows.float() * 2


def test_sizes_taken_from_tensor_values_are_checked_at_every_call():
    check_calls(
        SizedByData,
        {"grid": torch.tensor([[2, 4, 6]])},
        {"grid": torch.tensor([[3, 4, 8]])},
        {"grid": torch.tensor([[2, 6, 6]])},
    )


class SeededBySize(nn.Module):
    """A generator seeded with a size (``min(length, x.shape[1])``, as an ASR dither does)."""

    def forward(self, x, length: int):
        g = torch.Generator().manual_seed(min(length, x.shape[1]))
        return x + torch.randn(x.shape, generator=g)


def test_a_seed_computed_from_a_size_is_a_fact_of_the_graph():
    check_calls(
        SeededBySize,
        {"x": torch.zeros(2, 4), "length": 9},
        {"x": torch.zeros(2, 5), "length": 9},
        {"x": torch.zeros(2, 4), "length": 3},
    )


class SeededOnDevice(nn.Module):
    """A generator made in forward on the input's device, seeded from an argument."""

    def forward(self, x, seed: int = 3):
        g = torch.Generator(device=x.device).manual_seed(seed + 1)
        return x + torch.randn(x.shape, generator=g, device=x.device)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_generator_made_in_forward_on_cuda_is_made_anew_on_cuda():
    x = torch.zeros(2, 8, device="cuda")
    check_calls(SeededOnDevice, {"x": x, "seed": 3}, {"x": x, "seed": 3}, {"x": x, "seed": 5})


def test_exports_name_the_idioms_torchscript_has_no_form_of(tmp_path):
    import torchbend as tb

    legacy = tb.BendedModule(LegacySizes())
    legacy.trace(x=torch.randn(2, 3))
    with pytest.raises(tb.ExportError, match=r"legacy constructor .*node 'legacy_tensor'"):
        tb.export.torchscript(legacy, tmp_path / "legacy.ts")
    seeded = tb.BendedModule(SeededInForward())
    seeded.trace(x=torch.randn(2, 4), seed=3)
    with pytest.raises(tb.ExportError, match=r"random generator in forward"):
        tb.export.torchscript(seeded, tmp_path / "seeded.ts")
