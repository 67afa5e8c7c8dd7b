"""Tests of torchbend.discover.audition: soloing and bypassing a channel on a model whose
channels make known tones, activations over time as sounds and pictures, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchbend as tb
from torchbend.discover import activation_audio, activation_image, audition
from torchbend.discover.audition import CONTROL_RATE, PEAK, TONE, as_audio, auditioning
from torchbend.errors import DiscoveryError

RATE = 8000
LENGTH = 4096
FREQUENCIES = (500.0, 1500.0)
TONES = "mul_2"
"""The node ``[batch, 2, time]`` of :class:`TwoTones` whose channels are the two tones."""


class TwoTones(nn.Module):
    """Channel ``i`` of node ``mul_2`` is a sine at ``FREQUENCIES[i]`` scaled by the input's
    mean level; ``mix`` sums them. ``fast_pool`` (2000 frames a second) and ``slow_pool``
    (125) follow the input's time course; ``mean`` has no time axis."""

    def __init__(self) -> None:
        super().__init__()
        self.sample_rate = RATE
        self.mix = nn.Conv1d(2, 1, 1)
        with torch.no_grad():
            self.mix.weight.fill_(1.0)
            self.mix.bias.zero_()
        self.fast_pool = nn.AvgPool1d(4)
        self.slow_pool = nn.AvgPool1d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slow = self.slow_pool(self.fast_pool(x))
        level = slow.mean(-1)
        t = torch.arange(x.shape[-1], dtype=x.dtype) / RATE
        tones = torch.stack([torch.sin(2 * math.pi * f * t) for f in FREQUENCIES])
        return self.mix(tones * x.abs().mean(-1, keepdim=True)) * (1 + 0 * level[..., None])


def peak_frequency(audio: torch.Tensor) -> float:
    spectrum = torch.fft.rfft(audio.reshape(-1) * torch.hann_window(audio.numel()))
    return float(spectrum.abs().argmax()) * RATE / audio.numel()


@pytest.fixture
def bended() -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(TwoTones())
    bended.trace(x=torch.ones(1, 1, LENGTH))
    return bended


RAMP = torch.linspace(0.0, 1.0, LENGTH)[None, None]


def test_solo_keeps_one_tone_and_bypass_leaves_the_other(bended) -> None:
    both = bended(RAMP)
    for channel, frequency in enumerate(FREQUENCIES):
        solo = audition(bended, RAMP, TONES, channel)
        assert peak_frequency(solo) == pytest.approx(frequency, abs=4)
        other = audition(bended, RAMP, TONES, channel, mode="bypass")
        assert peak_frequency(other) == pytest.approx(FREQUENCIES[1 - channel], abs=4)
        assert torch.allclose(solo + other, both, atol=1e-6)
    assert torch.equal(audition(bended, RAMP, TONES), both)  # every channel soloed
    assert not audition(bended, RAMP, TONES, mode="bypass").any()
    assert torch.equal(audition(bended, RAMP, TONES, [0, -1]), both)


def test_bendings_stay_and_weights_never_change(bended) -> None:
    weights = {k: v.clone() for k, v in bended.module.state_dict().items()}
    bended.bend(tb.Scale(0.5), "mix.weight")
    bended.bend(tb.Ablate(1), f"^{TONES}$")
    before, config = bended(RAMP), repr(bended.bending_config())
    solo = audition(bended, RAMP, TONES, 0)  # on top of the Ablate of channel 1 and the Scale
    assert torch.allclose(solo, before) and solo.abs().max() > 0.1
    assert not audition(bended, RAMP, TONES, 1).any()
    assert repr(bended.bending_config()) == config
    assert torch.equal(bended(RAMP), before)
    state = bended.module.state_dict()
    assert all(torch.equal(state[k], v) for k, v in weights.items())
    with pytest.raises(RuntimeError, match="inside"), auditioning(bended, TONES, 0):
        raise RuntimeError("inside")
    assert repr(bended.bending_config()) == config and torch.equal(bended(RAMP), before)


def test_a_fast_node_plays_as_its_waveform_resampled(bended) -> None:
    audio, rate = activation_audio(bended, RAMP, "fast_pool")
    assert rate == RATE and audio.shape == (1, LENGTH)
    frames = F.avg_pool1d(RAMP, 4)  # 2000 frames a second: a waveform
    assert frames.shape[-1] * RATE / LENGTH >= CONTROL_RATE
    ramp = F.interpolate(frames, size=LENGTH, mode="linear", align_corners=False)[0]
    ramp = ramp - ramp.mean()
    assert torch.allclose(audio, ramp * PEAK / ramp.abs().max(), atol=1e-6)
    assert float(audio.abs().max()) == pytest.approx(PEAK)


def test_a_slow_node_is_the_envelope_of_a_tone(bended) -> None:
    audio, _ = activation_audio(bended, RAMP, "slow_pool", channel=0)
    frames = F.avg_pool1d(RAMP, 64)  # 125 frames a second: a control signal
    curve = F.interpolate(frames, size=LENGTH, mode="linear", align_corners=False)[0]
    envelope = (curve - curve.min()) / (curve.max() - curve.min())
    tone = torch.sin(2 * math.pi * TONE * torch.arange(LENGTH) / RATE)
    assert torch.allclose(audio, PEAK * envelope * tone, atol=1e-5)
    assert peak_frequency(audio) == pytest.approx(TONE, abs=4)
    noise, _ = activation_audio(bended, RAMP, "slow_pool", carrier="noise")
    assert noise[:, : LENGTH // 8].abs().max() < noise[:, -LENGTH // 8 :].abs().max() / 4


def test_as_audio_picks_and_averages_channels() -> None:
    fast = torch.stack([torch.ones(100), torch.linspace(-1, 1, 100)])[None]  # 1000 frames/s
    mean = as_audio(fast, 800, 8000)
    assert torch.allclose(as_audio(fast, 800, 8000, channel=1), mean, atol=1e-6)
    assert not as_audio(fast, 800, 8000, channel=0).any()  # a constant: only its mean, removed
    with pytest.raises(DiscoveryError, match="out of range for 2 channels"):
        as_audio(fast, 800, 8000, channel=2)


def test_the_picture_is_written(bended, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    path = activation_image(bended, RAMP, TONES, tmp_path / "tones.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: audition(b, RAMP, "mixx", 0), r"no activation 'mixx' .*did you mean 'mix'"),
        (
            lambda b: audition(b, RAMP, TONES, 2),
            rf"channel 2 is out of range for activation '{TONES}' of shape \[1, 2, 4096\]: it "
            r"has 2 channels",
        ),
        (lambda b: audition(b, RAMP, TONES, -3), r"channel -3 is out of range"),
        (lambda b: audition(b, RAMP, TONES, 0, mode="mute"), r"unknown mode 'mute'"),
        (lambda b: audition(b, RAMP, TONES, 0.5), r"channel is an int"),
        (lambda b: audition(b, RAMP, "arange", 0), r"'arange' has shape \[4096\]: no channel"),
        (
            lambda b: activation_audio(b, RAMP, "mean"),
            r"'mean' has shape \[1, 1\]: no time axis to play",
        ),
        (lambda b: activation_audio(b, RAMP, "mean_1"), r"shape \[1, 1, 1\]: no time axis"),
        (lambda b: activation_audio(b, RAMP, TONES, 5), r"it has 2 channels"),
        (lambda b: activation_audio(b, RAMP, TONES, carrier="drum"), r"unknown carrier"),
    ],
)
def test_bad_input_is_a_clear_error(bended, call, message) -> None:
    config = repr(bended.bending_config())
    with pytest.raises(DiscoveryError, match=message):
        call(bended)
    assert repr(bended.bending_config()) == config


@pytest.fixture(scope="module")
def ddsp() -> tuple[tb.BendedModule, torch.Tensor]:
    voice, _ = tb.audio.io.load("assets/sounds/voice.wav", mono=True)
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))
    return bended, voice[:, : 256 * 40][None]


def test_tiny_ddsp_latent_channels(ddsp) -> None:
    bended, x = ddsp
    plain = bended(x)
    solo = audition(bended, x, "cat", 0)
    bypass = audition(bended, x, "cat", 0, mode="bypass")
    assert solo.shape == bypass.shape == plain.shape
    assert not torch.equal(solo, plain) and not torch.equal(bypass, plain)
    assert torch.equal(bended(x), plain)
    audio, rate = activation_audio(bended, x, "cat", 0)  # 172 frames a second: an envelope
    assert rate == bended.sample_rate and audio.shape == (1, x.shape[-1])
    assert 0.4 < float(audio.abs().max()) <= PEAK
