"""The named descriptors on signals whose answers are known, and their changes in steps."""

from __future__ import annotations

import math

import pytest
import torch

from torchbend.audio.perceptual import (
    NAMES,
    change,
    check_descriptor,
    descriptor_changes,
    distance,
    perceive,
)
from torchbend.errors import AudioError

RATE = 44100
T = torch.arange(RATE, dtype=torch.float64) / RATE


def tone(freq: float, level: float = 0.1) -> torch.Tensor:
    return level * torch.sin(2 * math.pi * freq * T)


def noise(seed: int = 0, level: float = 0.1) -> torch.Tensor:
    return level * torch.randn(RATE, generator=torch.Generator().manual_seed(seed)).double()


def test_a_sine_reads_its_pitch_its_frequency_as_brightness_and_no_noise() -> None:
    values = perceive(tone(440.0), RATE)
    assert list(values) == list(NAMES)
    assert values["pitch"] == pytest.approx(440.0, rel=0.005)
    assert values["brightness"] == pytest.approx(440.0, rel=0.02)
    assert values["noisiness"] > 30.0  # dB of harmonic-to-noise ratio
    assert values["flatness"] < 1e-3
    assert values["onset_rate"] == 0.0


def test_white_noise_reads_flat_noisy_and_bright() -> None:
    values = perceive(noise(), RATE)
    assert values["flatness"] == pytest.approx(math.exp(-0.5772), abs=0.06)  # Euler's constant
    assert values["noisiness"] < 3.0
    assert values["brightness"] == pytest.approx(RATE / 4, rel=0.1)  # a flat spectrum's middle
    assert values["bandwidth"] == pytest.approx(RATE / 2 / math.sqrt(12), rel=0.1)  # uniform


def test_changes_read_in_perceptible_steps() -> None:
    before = perceive(tone(440.0), RATE)
    quieter = perceive(tone(440.0, level=0.05), RATE)
    assert change("loudness", before["loudness"], quieter["loudness"]) == pytest.approx(
        -20 * math.log10(2), abs=0.05
    )  # -6 dB is -6 steps of 1 LU
    higher = perceive(tone(440.0 * 2 ** (1 / 12)), RATE)
    assert descriptor_changes(before, higher)["pitch"] == pytest.approx(1.0, abs=0.05)
    assert descriptor_changes(before, higher)["brightness"] == pytest.approx(
        math.log(2 ** (1 / 12)) / math.log(1.15), abs=0.05
    )  # a semitone is 0.41 of a 15 % step
    noisier = perceive(tone(440.0) + noise(level=0.03), RATE)
    assert descriptor_changes(before, noisier)["noisiness"] > 1.0  # the HNR fell: noisier
    assert math.isnan(change("pitch", before["pitch"], math.nan))


def test_an_onset_rate_counts_clicks() -> None:
    clicks = torch.zeros(2 * RATE, dtype=torch.float64)
    clicks[:: RATE // 4] = 0.8  # four a second
    assert perceive(clicks + 1e-4 * noise(1).repeat(2), RATE)["onset_rate"] == pytest.approx(
        4.0, abs=0.6
    )


def test_the_distance_between_renders_is_zero_for_a_copy_and_grows_with_a_change() -> None:
    x = noise()
    assert distance(x, x) == 0.0
    assert distance(x, 0.5 * x) == pytest.approx(math.log(2), abs=0.05)


def test_bad_requests_are_named() -> None:
    with pytest.raises(AudioError, match="unknown descriptor 'sparkle'"):
        check_descriptor("sparkle")
    with pytest.raises(AudioError, match="too short to describe"):
        perceive(torch.zeros(100), RATE)
