"""Calibration of the quality measures on signals whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch

from torchbend.audio import quality as q

RATE = 44100


def _noise(seconds: float, seed: int = 0) -> torch.Tensor:
    return torch.randn(int(seconds * RATE), generator=torch.Generator().manual_seed(seed))


def _saw(period: int, seconds: float) -> torch.Tensor:
    """A saw repeating every ``period`` samples, the same in every cycle (from the index)."""
    n = torch.arange(int(seconds * RATE))
    return 0.3 * (2 * (n % period).float() / period - 1)


def test_a_full_scale_1khz_sine_reads_minus_3_lufs_and_0_dbfs():
    tone = q.sine(1000, 2.0, RATE, dbfs=0.0)
    assert q.loudness_lufs(tone, RATE) == pytest.approx(-3.01, abs=0.05)
    assert q.level_dbfs(tone) == pytest.approx(0.0, abs=0.01)


def test_loudness_follows_gain_and_k_weighting():
    x = 0.1 * _noise(3.0)
    assert q.loudness_lufs(x * 10 ** (-3 / 20), RATE) - q.loudness_lufs(x, RATE) == pytest.approx(
        -3.0, abs=0.01
    )
    # The high-pass of K-weighting: 20 Hz counts far less than 1 kHz at the same level.
    low = q.loudness_lufs(q.sine(20, 2.0, RATE), RATE)
    mid = q.loudness_lufs(q.sine(1000, 2.0, RATE), RATE)
    assert mid - low > 10
    # Gating: a second of silence after the sound barely lowers its loudness (the blocks
    # across the edge count, as in BS.1770).
    padded = torch.cat([x, torch.zeros(RATE)])
    assert q.loudness_lufs(padded, RATE) == pytest.approx(q.loudness_lufs(x, RATE), abs=0.3)
    assert q.loudness_lufs(torch.zeros(RATE), RATE) == -math.inf


def test_locked_lines_see_an_offset_comb_and_not_tones():
    chord = sum(q.sine(f, 6.0, RATE, -20) for f in (233.0, 311.0, 467.0))
    assert q.locked_lines_db(chord, chord, 256) < -60
    comb = torch.tensor([0.01, -0.01] * 4).repeat(chord.numel() // 8)  # a line at rate/2
    assert q.locked_lines_db(chord + comb, chord, 8) == pytest.approx(
        20 * math.log10(0.01 / float(chord.pow(2).mean().sqrt())), abs=0.5
    )


def test_tone_gain_and_dc():
    x = q.sine(440, 1.0, RATE)
    assert q.tone_gain_db(x, x, 440, RATE) == pytest.approx(0.0, abs=1e-6)
    assert q.tone_gain_db(0.5 * x, x, 440, RATE) == pytest.approx(-6.02, abs=0.01)
    assert q.tone_gain_db(q.sine(880, 1.0, RATE), x, 440, RATE) < -40
    assert q.dc(x + 0.25) == pytest.approx(0.25, abs=1e-3)


def test_harmonic_contrast_drops_with_what_varies_from_cycle_to_cycle():
    saw = _saw(400, 3.0)  # 110.25 Hz
    clean = q.harmonic_contrast_db(saw, 110.25, RATE)
    assert clean > 40
    noisy = q.harmonic_contrast_db(saw + 0.01 * _noise(3.0), 110.25, RATE)
    comb = saw + 0.03 * torch.sin(torch.arange(saw.numel()) * 2 * math.pi / 256)  # 172 Hz
    assert noisy < clean - 10
    assert q.harmonic_contrast_db(comb, 110.25, RATE) < 25


def test_spectral_distance_is_zero_for_the_signal_and_grows_with_damage():
    x = 0.3 * _noise(2.0) * torch.linspace(0, 1, 2 * RATE)
    assert q.spectral_distance(x, x) == 0.0
    quieter = q.spectral_distance(x * 10 ** (-3 / 20), x)
    assert quieter == pytest.approx(3 / 20 * math.log(10), rel=0.05)  # 3 dB in natural log
    assert q.spectral_distance(x + 1e-3 * _noise(2.0, 1), x) < quieter


def test_error_db_reads_the_power_of_the_difference():
    x = _noise(1.0)
    assert q.error_db(x, x) == -math.inf
    assert q.error_db(x * 1.1, x) == pytest.approx(-20.0, abs=1e-3)
    assert q.error_db(x + 0.01 * _noise(1.0, seed=1), x) == pytest.approx(-40.0, abs=0.2)
    assert q.error_db(torch.roll(x, 1), x) == pytest.approx(3.0, abs=0.2)  # a delay: uncorrelated


def _biquad(x: torch.Tensor, b: tuple[float, ...], a: tuple[float, ...]) -> torch.Tensor:
    """Direct form I, in a plain loop: an IIR filter (``a[0]`` is 1)."""
    xs = x.double().numpy()
    y = [0.0] * len(xs)
    x1 = x2 = y1 = y2 = 0.0
    for n, xn in enumerate(xs.tolist()):
        yn = b[0] * xn + b[1] * x1 + b[2] * x2 - a[1] * y1 - a[2] * y2
        x2, x1, y2, y1 = x1, xn, y1, yn
        y[n] = yn
    return torch.tensor(y, dtype=torch.float32)


def _peaking(freq: float, gain_db: float, q_: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A peaking EQ's coefficients (the Audio EQ Cookbook's)."""
    big_a = 10 ** (gain_db / 40)
    w = 2 * math.pi * freq / RATE
    alpha = math.sin(w) / (2 * q_)
    a0 = 1 + alpha / big_a
    b = ((1 + alpha * big_a) / a0, -2 * math.cos(w) / a0, (1 - alpha * big_a) / a0)
    return b, (1.0, -2 * math.cos(w) / a0, (1 - alpha / big_a) / a0)


@pytest.fixture(scope="module")
def voice() -> torch.Tensor:
    from torchbend.audio import load

    return load("assets/sounds/voice.wav", sample_rate=RATE, mono=True)[0][0, : 2 * RATE]


def test_lti_residual_of_filters_is_far_below_minus_10_db(voice):
    eq = _biquad(voice, *_peaking(1000.0, 9.0, 1.0))
    assert q.lti_residual_db(eq, voice) < -25
    spectrum = torch.fft.rfft(voice.double())
    freqs = torch.fft.rfftfreq(voice.numel(), 1 / RATE)
    tilt = torch.fft.irfft(spectrum * (freqs.clamp_min(50) / 1000) ** 0.5, voice.numel()).float()
    assert q.lti_residual_db(tilt, voice) < -25
    assert q.lti_residual_db(torch.roll(voice, 64), voice) < -20  # a short delay
    assert q.lti_residual_db(-0.5 * voice, voice) < -100  # a gain
    assert q.lti_residual_db(voice, voice) == -math.inf


def test_lti_residual_of_changes_no_filter_makes_is_above_minus_10_db(voice):
    from torchbend.audio import resample

    up = resample(voice[None], RATE, round(RATE / 2 ** (1 / 12)))[0]  # a semitone up
    padded = torch.nn.functional.pad(up, (0, voice.numel() - up.numel()))
    assert q.lti_residual_db(padded, voice) > -6
    tremolo = voice * (1 + 0.5 * torch.sin(2 * math.pi * 3 * torch.arange(voice.numel()) / RATE))
    assert q.lti_residual_db(tremolo, voice) > -10
    assert q.lti_residual_db(voice + 0.01 * _noise(2.0), voice) > -3
    with pytest.raises(q.AudioError, match="same length"):
        q.lti_residual_db(voice[:-1], voice)
