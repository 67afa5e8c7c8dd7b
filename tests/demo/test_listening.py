"""The demo's measures of what a bending does, on signals whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch

from torchbend.audio.quality import sine
from torchbend.demo.listening import bending_table, changes, hear, walk_table

RATE = 44100


def tone(freq: float, dbfs: float = -15.0, seconds: float = 1.0) -> torch.Tensor:
    return sine(freq, seconds, RATE, dbfs)[None]


def test_changes_read_a_fifth_up_six_decibels_down_and_more_noise():
    a = hear(tone(220.0), RATE)
    pitch, level, brightness, hnr = changes(hear(tone(330.0), RATE), a)
    assert pitch == pytest.approx(12 * math.log2(1.5), abs=0.1)
    assert brightness == pytest.approx(math.log2(1.5), abs=0.05)  # octaves of centroid
    assert level == pytest.approx(0.0, abs=0.1) and hnr == pytest.approx(0.0, abs=3.0)
    assert changes(hear(tone(220.0, -21.0), RATE), a)[1] == pytest.approx(-6.0, abs=0.1)
    noise = torch.randn(1, RATE, generator=torch.Generator().manual_seed(0)) * 0.1
    pitch, _, brightness, hnr = changes(hear(noise, RATE), a)
    assert pitch is None  # noise has no pitch to compare
    assert hnr is not None and hnr < -30  # dB: a steady tone reads 30 dB and more, noise below 0
    assert brightness is not None and brightness > 2  # octaves of centroid above a 220 Hz tone


def test_the_tables_print_signed_changes_and_the_walk_read_from_start_to_end():
    t = torch.arange(2 * RATE) / RATE
    glide = 0.1 * torch.sin(2 * math.pi * 220 * (t + t**2 / 4))[None]  # 220 Hz to 440 Hz
    renders = {
        "a": {"reconstruction": tone(220.0, seconds=2.0), "up": tone(330.0, seconds=2.0)},
        "b": {"reconstruction": tone(220.0, seconds=2.0), "up": tone(330.0, seconds=2.0)},
    }
    for by in renders.values():
        by["walk_pitch"] = glide
    heard = {s: {k: hear(y, RATE) for k, y in by.items()} for s, by in renders.items()}
    table = bending_table(heard, renders, ["up"], RATE)
    row = table.splitlines()[-1].split()
    assert row[0] == "up" and row[3] == "+7.0" and abs(float(row[1])) < 0.5
    walk = walk_table(heard, ["walk_pitch"]).splitlines()[-1].split()
    # the glide rises 12 semitones over the file: about 9.6 from its first fifth to its last
    assert walk[0] == "walk_pitch" and 8.0 < float(walk[1]) < 11.0
