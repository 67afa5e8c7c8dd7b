"""Calibration of the perceptual descriptors on signals whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.audio.signals import RATE, noise, saw, tone
from torchbend.audio import descriptors as d
from torchbend.audio import load, resample
from torchbend.audio.quality import loudness_lufs


def _shifted_up(x: torch.Tensor, semitones: float) -> torch.Tensor:
    """``x`` played ``semitones`` higher (and shorter): resampled to fewer samples."""
    return resample(x[None], RATE, round(RATE / 2 ** (semitones / 12)))[0]


def test_the_centroid_of_known_spectra():
    assert d.spectral_centroid(tone(1000), RATE) == pytest.approx(1000, rel=0.01)
    # Two sines of equal amplitude: the centroid lies halfway.
    assert d.spectral_centroid(tone(500) + tone(1500), RATE) == pytest.approx(1000, rel=0.01)
    # White noise: a flat magnitude spectrum, so the middle of 0..rate/2.
    assert d.spectral_centroid(noise(2.0), RATE) == pytest.approx(RATE / 4, rel=0.02)
    # Silent frames do not count: a tone then silence reads the tone.
    gapped = torch.cat([tone(1000), torch.zeros(RATE)])
    assert d.spectral_centroid(gapped, RATE) == pytest.approx(1000, rel=0.01)
    assert math.isnan(d.spectral_centroid(torch.zeros(RATE), RATE))
    track = d.centroid_track(gapped, RATE)
    assert track.shape == (int(3 * RATE - 2048) // 512 + 1,)
    assert track[:100].sub(1000).abs().max() < 10 and track[-10:].isnan().all()


@pytest.mark.parametrize("freq", [55.0, 110.0, 220.5, 440.0, 1000.0, 1800.0])
def test_yin_finds_the_pitch_of_tones_and_saws(freq):
    assert d.pitch_hz(tone(freq), RATE) == pytest.approx(freq, rel=1e-3)
    assert d.pitch_hz(saw(freq), RATE) == pytest.approx(freq, rel=3e-3)


def test_noise_and_silence_have_no_pitch():
    assert math.isnan(d.pitch_hz(noise(2.0), RATE))
    assert math.isnan(d.pitch_hz(torch.zeros(RATE), RATE))
    track = d.pitch_track(torch.cat([tone(330), torch.zeros(RATE)]), RATE)
    assert track[:40].sub(330).abs().max() < 1 and track[-10:].isnan().all()


@pytest.mark.parametrize("source", ["tone", "voice"])
def test_a_semitone_up_by_resampling_moves_the_pitch_one_semitone(source):
    if source == "tone":
        x = saw(196.0)
    else:
        # One sung note (with vibrato): a line's median would move to another note when
        # the shifted render, shorter, holds less of its last note.
        x = load("assets/sounds/voice.wav", sample_rate=RATE, mono=True)[0][0, : RATE // 2]
    before, after = d.pitch_hz(x, RATE), d.pitch_hz(_shifted_up(x, 1.0), RATE)
    assert 12 * math.log2(after / before) == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("snr", [0.0, 10.0, 20.0])
@pytest.mark.parametrize("wave", [tone, saw])
def test_the_harmonic_to_noise_ratio_of_a_tone_plus_noise_tracks_the_snr(snr, wave):
    x = wave(220.0)
    n = noise(2.0)
    n = n * float(x.pow(2).mean().sqrt() / n.pow(2).mean().sqrt()) * 10 ** (-snr / 20)
    assert d.hnr_db(x + n, RATE) == pytest.approx(snr, abs=1.5 if snr < 20 else 3.5)
    if snr >= 10:  # the pitch holds in noise (the octave check)
        assert d.pitch_hz(x + n, RATE) == pytest.approx(220.0, rel=0.01)


def test_the_harmonic_to_noise_ratio_of_noise_and_tones():
    assert d.hnr_db(noise(2.0), RATE) < -5
    assert d.hnr_db(tone(220.0), RATE) > 40
    assert math.isnan(d.hnr_db(torch.zeros(RATE), RATE))
    assert d.hnr_track(tone(220.0), RATE).shape == d.pitch_track(tone(220.0), RATE).shape


def test_describe_gives_every_descriptor():
    x = saw(220.0) * 0.1
    values = d.describe(x, RATE)
    assert tuple(values) == d.DESCRIPTORS
    assert values["pitch_hz"] == pytest.approx(220.0, rel=3e-3)
    assert values["hnr_db"] > 15
    assert values["onset_rate"] == 0.0
    assert values["loudness_lufs"] == loudness_lufs(x, RATE)
    assert tuple(d.character(x, RATE)) == d.DESCRIPTORS[:4]
    assert np.isfinite(list(values.values())).all()


def test_the_octave_check_keeps_the_period_of_a_noisy_tone():
    # A 523 Hz saw 8 dB above white noise: three periods dip below YIN's threshold before
    # one does in most frames; the octave check finds the period again.
    x = saw(523.0)
    n = noise(2.0)
    noisy = x + n * float(x.pow(2).mean().sqrt() / n.pow(2).mean().sqrt()) * 10**-0.4
    assert d.pitch_hz(noisy, RATE) == pytest.approx(523.0, rel=0.01)


def test_a_pitch_shift_needs_a_tenth_of_the_frames_voiced_in_both():
    """Two tracks voiced an octave apart on a handful of frames (a noise with a few octave
    errors) read no shift; voiced on a tenth of their frames, they read the octave."""
    frames = 100
    low, high = torch.full((frames,), math.nan), torch.full((frames,), math.nan)
    low[:9], high[:9] = 110.0, 220.0
    assert math.isnan(d.pitch_shift(low, high))
    low[:10], high[:10] = 110.0, 220.0
    assert d.pitch_shift(low, high) == pytest.approx(12.0)
