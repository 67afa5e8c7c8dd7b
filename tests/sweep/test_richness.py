"""The bend-richness sweep: which activations it bends, and how it judges a render."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.errors import SweepError
from torchbend.sweep import richness as r

RATE = 44100


def _sounds(seconds: float = 0.5) -> dict[str, torch.Tensor]:
    t = torch.arange(int(seconds * RATE)) / RATE
    noise = torch.randn(t.numel(), generator=torch.Generator().manual_seed(0))
    saw = 2 * ((220 * t) % 1.0) - 1
    return {"saw": 0.3 * saw, "noise": 0.1 * noise}


class Linear(nn.Module):
    """Two convolutions, nothing else: every bending that keeps it linear and time-invariant
    (a scale) is a filter."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = nn.Conv1d(1, 4, 9, padding=4)
        self.second = nn.Conv1d(4, 1, 9, padding=4, bias=False)
        with torch.no_grad():
            self.first.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def test_hidden_activations_leave_out_the_input_and_what_is_returned():
    from torchbend import models

    bended = tb.BendedModule(models.load("tiny_rave"))
    bended.trace("forward", x=torch.zeros(1, 1, 256))
    hidden = r.hidden_activations(bended)
    assert hidden[0] == "reshape" and "x" not in hidden
    assert "reshape_1" not in hidden and hidden[-1] == "transpose_1"
    assert len(hidden) == len(bended.activation_names()) - 2


@pytest.fixture(scope="module")
def linear_sweep() -> list[r.RichnessRender]:
    return r.richness_sweep(Linear().eval(), _sounds(), RATE)


def test_the_sweep_renders_each_bending_on_each_hidden_activation_and_sound(linear_sweep):
    assert len(linear_sweep) == 1 * len(r.BENDINGS) * 2  # one hidden activation: first
    assert {x.node for x in linear_sweep} == {"first"}
    assert [x.bending for x in linear_sweep[::2]] == list(r.BENDINGS)
    assert all(x.changed and not x.nonfinite for x in linear_sweep)


def test_a_scale_of_a_linear_model_is_a_filter_and_noise_is_not(linear_sweep):
    judged = {(x.bending, x.sound): x for x in linear_sweep}
    doubled = judged["Scale(2)", "saw"]
    assert doubled.residual_db < -60 and not doubled.beyond_filter
    assert doubled.loudness_lu == pytest.approx(6.02, abs=0.05)
    assert not doubled.perceptible  # louder, not another sound
    assert judged["Scale(0)", "noise"].residual_db == -math.inf  # silence: a gain of 0
    assert judged["Scale(0)", "noise"].loudness_lu == -math.inf
    assert judged["Noise(std/2)", "saw"].beyond_filter
    assert judged["Noise(std/2)", "saw"].perceptible  # noise lowers the saw's HNR


def test_summary_counts():
    def render(changed: bool, residual: float, moved: tuple[str, ...]) -> r.RichnessRender:
        return r.RichnessRender("n", "b", "s", changed, False, False, residual, 0.0, moved)

    renders = [
        render(True, -3.0, ("hnr_db",)),
        render(True, -30.0, ()),
        render(True, -10.0, ()),
        render(False, math.nan, ()),
    ]
    s = r.summarise(renders)
    assert (s.renders, s.changed, s.beyond_filter, s.perceptible) == (4, 3, 2, 1)
    assert s.beyond_filter_share == pytest.approx(2 / 3) and s.perceptible_share == 0.25


def test_moved_descriptors_reads_each_threshold():
    before = {"centroid_hz": 1000.0, "pitch_hz": 220.0, "hnr_db": 10.0, "onset_rate": 4.0}
    before["loudness_lufs"] = -20.0

    def moved(**after: float) -> tuple[str, ...]:
        return r.moved_descriptors(before, {**before, **after})

    assert moved() == ()
    assert moved(centroid_hz=1160.0) == ("centroid_hz",)
    assert moved(centroid_hz=860.0) == ("centroid_hz",)  # 1000 / 860 > 1.15
    assert moved(centroid_hz=1140.0, hnr_db=12.9, onset_rate=4.5) == ()
    assert moved(pitch_hz=234.0, hnr_db=6.5) == ("pitch_hz", "hnr_db")
    assert moved(pitch_hz=math.nan) == ()  # unvoiced: no pitch to compare
    assert moved(onset_rate=5.0) == ("onset_rate",)
    assert moved(loudness_lufs=-30.0) == ()  # the loudness is no character
    assert r.moved_descriptors({**before, "onset_rate": 0.0}, before) == ("onset_rate",)
    # Frame by frame, the pitch moved although the medians did not, or the other way round.
    assert r.moved_descriptors(before, before, semitones=-1.2) == ("pitch_hz",)
    assert r.moved_descriptors(before, {**before, "pitch_hz": 440.0}, semitones=0.3) == ()
    assert r.moved_descriptors(before, {**before, "pitch_hz": 440.0}, semitones=math.nan) == ()
    assert r.normalised_change("pitch_hz", 220.0, 440.0) == pytest.approx(12.0)
    assert r.normalised_change("centroid_hz", 1000.0, 1150.0) == pytest.approx(1.0)


def test_the_sounds_must_share_a_length():
    sounds = {"a": torch.zeros(512), "b": torch.zeros(1024)}
    with pytest.raises(SweepError, match="one length"):
        r.richness_sweep(Linear(), sounds, RATE)
