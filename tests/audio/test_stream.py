"""Tests for torchbend.audio.stream: block-by-block streaming, state, channels, stats, ramps."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.audio.stream import Stream, StreamStats
from torchbend.errors import AudioError

pytestmark = pytest.mark.audio


class Encoder(nn.Module):
    """A strided conv: one frame of 3 channels every ``ratio`` samples, no overlap."""

    def __init__(self, ratio: int = 4) -> None:
        super().__init__()
        self.ratio = ratio
        self.conv = nn.Conv1d(1, 3, ratio, stride=ratio)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).repeat_interleave(self.ratio, -1)[:, :1]


class Delay(nn.Module):
    """Delays each channel by ``delay`` samples, keeping past samples in a buffer per batch."""

    channels = 1
    past: torch.Tensor

    def __init__(self, delay: int = 5) -> None:
        super().__init__()
        self.latency = delay
        self.register_buffer("past", torch.zeros(1, 1, delay))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != 1:
            raise ValueError(f"Delay is mono, got {x.shape[1]} channels")
        if self.past.shape[0] != x.shape[0]:
            self.past = x.new_zeros(x.shape[0], 1, self.past.shape[-1])
        full = torch.cat([self.past, x], -1)
        self.past = full[..., x.shape[-1] :].clone()
        return full[..., : x.shape[-1]]

    def reset_cache(self) -> None:
        self.past.zero_()


class FixedDelay(nn.Module):
    """A one-sample delay for batch 1 whose state is updated in place (traceable)."""

    past: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("past", torch.zeros(1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        full = torch.cat([self.past, x], -1)
        self.past.copy_(full[..., -1:])
        return full[..., :-1]


def delayed(x: torch.Tensor, delay: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (delay, 0))[..., : x.shape[-1]]


@pytest.mark.parametrize("block_size", [64, 256, 1000, 2048])
@pytest.mark.parametrize("length", [1, 63, 64, 777, 4097])
def test_identity_bit_for_bit(block_size: int, length: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, length)
    stream = Stream(nn.Identity(), block_size=block_size)
    y = stream.process(x)
    assert y.shape == x.shape
    assert torch.equal(y, x)
    assert stream.stats.blocks == -(-length // block_size)


def test_batched_input_keeps_its_rank() -> None:
    x = torch.randn(3, 2, 300, generator=torch.Generator().manual_seed(0))
    assert torch.equal(Stream(nn.Identity(), block_size=128).process(x), x)


@pytest.mark.parametrize("block_size", [64, 96, 512])
def test_state_carries_across_blocks(block_size: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 1000)
    stream = Stream(Delay(5), block_size=block_size)
    assert torch.equal(stream.process(x), delayed(x, 5))
    stream.reset()
    assert torch.equal(stream.process(x), delayed(x, 5))


def test_mono_model_on_stereo_runs_channels_as_batch() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 500)
    stream = Stream(Delay(3), block_size=128)
    assert stream.channels == 1
    y = stream.process(x)
    assert torch.equal(y, delayed(x, 3))
    assert torch.equal(Stream(Delay(3), block_size=128).process(x[:1]), delayed(x[:1], 3))


def test_mono_input_to_stereo_model_is_copied() -> None:
    x = torch.randn(1, 200, generator=torch.Generator().manual_seed(0))
    y = Stream(nn.Identity(), block_size=64, channels=2).process(x)
    assert torch.equal(y, x.expand(2, -1))
    with pytest.raises(AudioError, match="takes 2 channels, got 3"):
        Stream(nn.Identity(), block_size=64, channels=2).process(torch.zeros(3, 64))


def test_ratio_encoder() -> None:
    torch.manual_seed(0)
    model = Encoder(4)
    stream = Stream(model, "encode", block_size=256)
    assert stream.ratio == 4
    x = torch.randn(1, 1024)
    with torch.no_grad():
        assert torch.allclose(stream.process(x), model.encode(x[None])[0], atol=1e-6)
    assert stream.process(torch.randn(1, 301)).shape == (3, 76)  # ceil(301 / 4) frames
    assert Stream(model, block_size=256).process(torch.randn(1, 301)).shape == (1, 301)


def test_block_size_validation() -> None:
    with pytest.raises(AudioError, match="between 64 and 8192 samples, got 32"):
        Stream(nn.Identity(), block_size=32)
    with pytest.raises(AudioError, match="got 16384"):
        Stream(nn.Identity(), block_size=16384)
    with pytest.raises(
        AudioError,
        match=r"block_size 1000 is not a multiple of the model's ratio 256.*768 and 1024",
    ):
        Stream(Encoder(256), block_size=1000)
    with pytest.raises(AudioError, match=r"nearest valid sizes are 8190$"):
        Stream(Encoder(3), block_size=8191)
    with pytest.raises(AudioError, match="no block size"):
        Stream(nn.Identity(), block_size=4096, ratio=10000)
    with pytest.raises(AudioError, match="has no method 'decode'"):
        Stream(nn.Identity(), "decode")


def test_input_validation() -> None:
    stream = Stream(nn.Identity(), block_size=64)
    with pytest.raises(AudioError, match=r"got \[64\]; add a channel axis"):
        stream.process(torch.zeros(64))
    with pytest.raises(AudioError, match="blocks of 64 samples, got 63"):
        stream.process_block(torch.zeros(1, 63))
    assert stream.process_block(torch.ones(2, 64)).shape == (2, 64)


def test_stats() -> None:
    stream = Stream(Delay(7), block_size=128, sample_rate=48000)
    assert stream.stats == StreamStats(128, 48000, 135, 0, 0, 0.0, 0.0, 0.0, 0.0)
    stream.process(torch.zeros(1, 1000))
    stats = stream.stats
    assert stats.blocks == 8
    assert stats.latency == 128 + 7
    assert 0 <= stats.overruns <= 8
    assert stats.realtime_factor > 0
    assert stats.budget == 128 / 48000
    assert "8 blocks of 128 at 48000 Hz" in str(stats)
    stream.reset()
    assert stream.stats.blocks == 0
    assert "Stream(Delay, block_size=128, channels=1, sample_rate=48000)" == repr(stream)


def test_bended_stateful_model() -> None:
    torch.manual_seed(0)
    model = FixedDelay()
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, 64))
    model.past.zero_()
    x = torch.randn(1, 1, 640)
    y = Stream(bended, block_size=64).process(x)
    assert torch.equal(y, delayed(x, 1))


def scaled_identity(ramp: int, block_size: int) -> tuple[tb.BendedModule, Stream]:
    bended = tb.BendedModule(nn.Sequential(nn.Identity()))
    bended.trace(input=torch.zeros(1, 1, block_size))
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 1.0), ramp=ramp)
    bended.bend(tb.Scale(gain), "_0$")
    return bended, Stream(bended, block_size=block_size)


@pytest.mark.parametrize("channels", [1, 2])
def test_ramped_control_change_is_smooth(channels: int) -> None:
    block = 256
    bended, stream = scaled_identity(1, block)
    x = torch.ones(channels, block)
    out = [stream.process_block(x)]
    bended.update("gain", 0.0)
    out += [stream.process_block(x), stream.process_block(x)]
    y = torch.cat(out, -1)
    jump = y.diff(dim=-1).abs().max().item()
    assert jump <= 1.0 / block + 1e-6
    assert y[:, -block:].abs().max().item() == 0.0  # the ramp ends within one block
    assert y[:, block - 1].eq(1.0).all() and y[:, 2 * block - 1].eq(0.0).all()


def test_unramped_control_change_jumps() -> None:
    block = 256
    bended, stream = scaled_identity(0, block)
    x = torch.ones(1, block)
    out = [stream.process_block(x)]
    bended.update("gain", 0.0)
    out.append(stream.process_block(x))
    jump = torch.cat(out, -1).diff(dim=-1).abs().max().item()
    assert jump == 1.0


def test_tiny_rave_streams_like_offline() -> None:
    models = pytest.importorskip("torchbend.models", reason="torchbend.models not available")
    torch.manual_seed(0)
    model = models.TinyRave(latent_size=4, hidden=(8, 8)).eval()
    x = torch.randn(2, 1, 2048) * 0.1
    with torch.no_grad():
        offline = model(x)
    model.set_streaming(True)
    with torch.no_grad():
        model(torch.zeros(2, 1, 512))  # size the caches for a batch of 2 (graphs cannot resize)
    model.reset_cache()
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(2, 1, 512))
    stream = Stream(bended, block_size=512, channels=1)
    assert stream.ratio == model.ratio == 16
    y = stream.process(x[:, 0])  # [2 channels, time]: each channel runs as a batch item
    assert y.shape == (2, 2048)
    assert torch.allclose(y, offline[:, 0], atol=1e-5)


def test_before_block_runs_before_each_block_and_can_move_a_control():
    gain = tb.BendingParameter("gain", 1.0)
    bended = tb.BendedModule(nn.Sequential(nn.Identity()))
    bended.trace(input=torch.zeros(1, 1, 64))
    bended.bend(tb.Scale(gain), "input")
    seen = []

    def before(i, count):
        seen.append((i, count))
        bended.update("gain", float(i))

    y = Stream(bended, block_size=64).process(torch.ones(1, 200), before_block=before)
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert y.shape == (1, 200)
    assert torch.equal(y[0, ::64], torch.tensor([0.0, 1.0, 2.0, 3.0]))


def test_pcm_and_float64_are_converted_to_the_models_dtype() -> None:
    """int16 and int32 PCM by their full scale, float64 to the model's float32; a model in
    float64 gets float64."""
    conv = nn.Conv1d(1, 1, 1, bias=False)
    nn.init.ones_(conv.weight)
    stream = Stream(conv, block_size=256)
    x = torch.randn(1, 1000, generator=torch.Generator().manual_seed(0)).clamp(-1, 0.99)
    expected = stream.process(x)
    pcm16 = (x * 32768).round().to(torch.int16)
    assert torch.allclose(stream.process(pcm16), expected, atol=1 / 32768, rtol=0)
    pcm32 = (x.double() * 2**31).round().to(torch.int32)
    assert torch.allclose(stream.process(pcm32), expected, atol=1e-6, rtol=0)
    wide = stream.process(x.double())
    assert wide.dtype == torch.float32 and torch.equal(wide, expected)
    assert Stream(conv.double(), block_size=256).process(x).dtype == torch.float64
    with pytest.raises(AudioError, match=r"float audio or 16- or 32-bit PCM .* got torch.int64"):
        stream.process(torch.zeros(1, 100, dtype=torch.int64))
