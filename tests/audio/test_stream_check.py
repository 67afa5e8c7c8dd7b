"""The streaming check: block by block against one pass, in Stream and in nn~ files."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torchbend as tb
from tests.audio.stateless import Centred, Recurrent, WaveNet, built
from torchbend.audio.stream import Stream
from torchbend.audio.stream_check import StreamWarning


@pytest.mark.parametrize("kind", [WaveNet, Centred, Recurrent])
def test_a_model_without_state_is_caught_clicking_at_block_edges(kind: type[nn.Module]) -> None:
    stream = Stream(built(kind), block_size=256)
    with pytest.warns(StreamWarning, match="does not stream: block by block at 256") as caught:
        stream.process(torch.zeros(1, 512))
    assert "tb.audio.make_streaming(model)" in str(caught[0].message)
    check = stream.streaming_check
    assert check is not None and check.verdict == "differs" and not check.ok
    assert check.edge_error > 10 * check.inner_error  # the difference is at block edges
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamWarning)
        stream.process(torch.zeros(1, 512))  # once per stream
        Stream(built(kind), block_size=256, check=False).process(torch.zeros(1, 512))


@pytest.mark.parametrize(("name", "block"), [("tiny_rave", 64), ("tiny_ddsp", 2048)])
def test_the_shipped_models_stream_exactly(name: str, block: int) -> None:
    model = tb.models.load(name).set_streaming(True)
    stream = Stream(model, block_size=block)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamWarning)
        check = stream.check_streaming()
    assert check.verdict == "exact", check.describe(name)
    if name == "tiny_rave":  # offline mode: each block starts from silence
        model.set_streaming(False)
        assert Stream(model, block_size=block).check_streaming(1).verdict == "differs"


class NoisyGain(nn.Module):
    """Random per call, not per sample: another gain each block, everywhere in it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (1 + 0.1 * torch.randn(x.shape[0], 1, 1))


class Noise(nn.Module):
    """Noise drawn per sample, in order: the same draws block by block under one seed."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.1 * torch.randn_like(x)


def test_a_model_drawing_random_numbers_is_not_taken_for_clicks() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamWarning)
        gain = Stream(NoisyGain(), block_size=128).check_streaming()
        noise = Stream(Noise(), block_size=128).check_streaming()
    assert gain.verdict == "random" and gain.random and gain.ok
    assert noise.verdict == "exact"


def test_a_stateful_model_without_reset_keeps_its_state() -> None:
    class Accumulate(nn.Module):
        total: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(1, 1, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.total + x.cumsum(-1)
            self.total.copy_(y[..., -1:])
            return y

    model = Accumulate()
    model.total.fill_(3.0)
    check = Stream(model, block_size=64).check_streaming(1)
    assert check.verdict == "exact"  # each pass from the state it had
    assert model.total.item() == 3.0  # and put back after


def test_a_model_that_fails_on_a_longer_input_is_unchecked() -> None:
    class Fixed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.shape[-1] != 64:
                raise ValueError("64 samples only")
            return x

    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamWarning)
        check = Stream(Fixed(), block_size=64).check_streaming()
    assert check.verdict == "unchecked" and "64 samples only" in check.reason
