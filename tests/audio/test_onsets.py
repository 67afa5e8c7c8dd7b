"""Calibration of the onset detector: click trains, steady sounds, notes after gaps."""

from __future__ import annotations

import pytest
import torch

from tests.audio.signals import RATE, noise, saw, tone
from torchbend.audio import onsets as d


@pytest.mark.parametrize("per_second", [1, 2, 4, 8, 12])
def test_click_trains_give_their_onset_rate(per_second):
    clicks = torch.zeros(2 * RATE)
    clicks[1000 :: RATE // per_second] = 1.0
    assert d.onset_rate(clicks, RATE) == pytest.approx(per_second)
    # Blind to the level, and to a steady noise well below the clicks.
    quiet = 0.01 * clicks + 1e-4 * noise(2.0)
    assert d.onset_rate(quiet, RATE) == pytest.approx(per_second)
    times = d.onset_times(clicks, RATE)
    expected = 1000 / RATE + torch.arange(times.numel()) / per_second
    assert (times - expected.double()).abs().max() < 0.03


def test_steady_sounds_have_no_onsets():
    assert d.onset_rate(noise(2.0), RATE) == 0.0
    assert d.onset_rate(tone(220) * (1 + 0.5 * tone(2.0)), RATE) == 0.0  # tremolo
    assert d.onset_rate(torch.zeros(RATE), RATE) == 0.0


def test_notes_after_gaps_are_onsets():
    notes = torch.cat([torch.cat([saw(f, 0.45), torch.zeros(RATE // 20)]) for f in (110, 165) * 4])
    assert d.onset_times(notes, RATE).numel() == 7  # the first note starts the signal: no rise
