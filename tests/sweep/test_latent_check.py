"""The latent check: named channels walked over their ranges, and Spearman's rank correlation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchbend.errors import SweepError
from torchbend.sweep import latent_check as lc

RATE = 44100
HOP = 256


class Named(nn.Module):
    """A latent of pitch (octaves re 440 Hz), loudness (log10 of an RMS) and one unnamed
    channel; decode plays a sine at that pitch and level, so each named channel moves its
    descriptor and nothing else."""

    latent_names = ("pitch", "loudness", "texture")
    latent_ranges = {"pitch": (-2.0, 1.0), "loudness": (-2.5, -0.5)}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.shape[-1] // HOP
        return torch.tensor([-1.0, -1.5, 0.0])[None, :, None].repeat(x.shape[0], 1, frames)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        controls = z.repeat_interleave(HOP, -1)
        phase = torch.cumsum(2 * math.pi * 440 * 2 ** controls[:, 0] / RATE, -1)
        return (math.sqrt(2) * 10 ** controls[:, 1] * torch.sin(phase))[:, None]


def test_spearman():
    assert lc.spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    assert lc.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert lc.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert lc.spearman([1, 2, 3], [1, 1, 2]) == pytest.approx(math.sqrt(3) / 2)  # a tie
    assert math.isnan(lc.spearman([1, 2, 3], [1, math.nan, 2]))
    assert math.isnan(lc.spearman([1, 2, 3], [5, 5, 5]))


def test_each_named_channel_moves_its_descriptor_and_not_the_others():
    sounds = {"a": torch.zeros(RATE // 2 // HOP * HOP), "b": torch.zeros(RATE // 2 // HOP * HOP)}
    walks = lc.latent_walks(Named(), sounds, RATE)
    assert [(w.channel, w.sound) for w in walks] == [
        ("pitch", "a"),
        ("pitch", "b"),
        ("loudness", "a"),
        ("loudness", "b"),
    ]
    pitch, loudness = walks[0], walks[2]
    assert pitch.values[0] == -2.0 and pitch.values[-1] == 1.0 and len(pitch.values) == 9
    assert pitch.descriptors["pitch_hz"][0] == pytest.approx(110.0, rel=0.01)
    assert pitch.descriptors["pitch_hz"][-1] == pytest.approx(880.0, rel=0.01)
    assert pitch.rho == pytest.approx(1.0) and pitch.effect("pitch_hz") == pytest.approx(36, abs=1)
    assert loudness.effect("loudness_lufs") == pytest.approx(40.0, abs=0.5)
    assert loudness.strongest_other[1] < 1.0
    assert all(w.holds for w in walks)


def test_ranges_come_from_the_argument_then_the_model():
    sounds = {"a": torch.zeros(RATE // 4 // HOP * HOP)}
    model = Named()
    model.latent_ranges = {"pitch": (0.0, 0.0), "loudness": (-2.0, -1.0)}  # type: ignore[assignment]
    walks = lc.latent_walks(model, sounds, RATE, steps=3)
    assert walks[0].values == (0.0, 0.0, 0.0) and not walks[0].holds  # a constant pitch
    walks = lc.latent_walks(model, sounds, RATE, ranges={"pitch": (-1, 0), "loudness": (-2, -1)})
    assert walks[0].values[0] == -1.0


def test_a_model_with_no_named_channel_is_refused():
    class Unnamed(Named):
        latent_names = ("a", "b", "c")

    with pytest.raises(SweepError, match="names no latent channel among pitch"):
        lc.latent_walks(Unnamed(), {"a": torch.zeros(HOP)}, RATE)


def test_without_ranges_a_channel_walks_what_the_sounds_span_and_a_walk_that_moves_nothing_fails():
    model = Named()
    model.latent_ranges = {}  # type: ignore[misc]
    sounds = {"a": torch.zeros(RATE // 2 // HOP * HOP)}
    walks = lc.latent_walks(model, sounds, RATE)
    # The sounds encode to one pitch and one level: a walk of one value moves nothing, and
    # a channel that moves nothing perceptibly does not hold, however monotonic.
    assert walks[0].values == (-1.0,) * 9 and walks[1].values == (-1.5,) * 9
    assert not any(w.holds for w in walks)
