"""The measures and flags of a sweep's render, on signals whose answer is known."""

from __future__ import annotations

import json
import math

import pytest
import torch

from torchbend.audio import quality as q
from torchbend.sweep import measure as m

RATE = 44100
EULER = 0.5772156649015329


def _noise(seconds: float, seed: int = 0, scale: float = 0.1) -> torch.Tensor:
    n = int(seconds * RATE)
    return scale * torch.randn(1, n, generator=torch.Generator().manual_seed(seed))


def _music(seconds: float = 2.0) -> torch.Tensor:
    """A chord over coloured noise with a swell: a spectrum above the floor almost everywhere."""
    chord = sum(q.sine(f, seconds, RATE, -20) for f in (110.0, 277.0, 415.0, 1320.0))
    noise = _noise(seconds, seed=3)[0]
    coloured = torch.cat([noise[:1], noise[1:] + 0.9 * noise[:-1]])  # tilted to the lows
    return (chord + coloured * torch.linspace(0.2, 1.0, chord.numel())).unsqueeze(0)


def _finite(values: dict[str, float]) -> bool:
    return all(isinstance(v, float) and math.isfinite(v) for v in values.values())


def _raised(flags: dict[str, bool]) -> set[str]:
    return {name for name, raised in flags.items() if raised}


def test_names_and_order():
    x = _noise(0.5)
    values, flags = m.measure(x, RATE, x)
    assert (
        tuple(values)
        == m.MEASURES
        == (
            "loudness_lufs",
            "peak_dbfs",
            "rms_dbfs",
            "dc",
            "centroid_hz",
            "flatness",
            "bandwidth_hz",
            "distance",
        )
    )
    assert tuple(flags) == m.FLAGS == ("nonfinite", "silent", "clipping", "dc", "unchanged")
    assert m.BROKEN == ("nonfinite", "silent", "clipping", "dc")
    assert all(type(v) is bool for v in flags.values())


@pytest.mark.parametrize("freq", [220.0, 1000.0, 5000.0])
def test_a_sine_has_its_frequency_for_centroid_and_almost_no_flatness_or_bandwidth(freq):
    tone = q.sine(freq, 2.0, RATE, dbfs=-12).unsqueeze(0)
    values, flags = m.measure(tone, RATE, tone)
    assert values["centroid_hz"] == pytest.approx(freq, rel=0.05)
    assert values["flatness"] < 1e-3
    assert values["bandwidth_hz"] < 200  # a Hann window's leakage, against 6366 for noise
    assert values["peak_dbfs"] == pytest.approx(-12.0, abs=0.01)
    assert values["rms_dbfs"] == pytest.approx(-12.0, abs=0.01)
    assert values["dc"] == pytest.approx(0.0, abs=1e-4)
    assert _raised(flags) == {"unchanged"}


def test_white_noise_is_flat_and_centred_on_a_quarter_of_the_rate():
    values, flags = m.measure(_noise(4.0), RATE, _noise(4.0, seed=1))
    # Each bin's power of Gaussian noise is exponential: E[log P] = log E[P] - Euler's constant.
    assert values["flatness"] == pytest.approx(math.exp(-EULER), abs=0.01)
    assert values["centroid_hz"] == pytest.approx(RATE / 4, rel=0.01)
    assert values["bandwidth_hz"] == pytest.approx(RATE / 2 / math.sqrt(12), rel=0.01)
    assert values["rms_dbfs"] == pytest.approx(20 * math.log10(0.1 * math.sqrt(2)), abs=0.05)
    # Another draw of the same noise: each bin differs, by about the same at every size.
    assert 0.5 < values["distance"] < 1.5
    assert not _raised(flags)


def test_silence_is_flagged_with_floored_levels_and_finite_values():
    values, flags = m.measure(torch.zeros(1, RATE), RATE, _noise(1.0))
    assert values["loudness_lufs"] == values["peak_dbfs"] == values["rms_dbfs"] == m.FLOOR_DB
    assert values["centroid_hz"] == values["flatness"] == values["bandwidth_hz"] == 0.0
    assert values["dc"] == 0.0
    assert _finite(values)
    assert values["distance"] > 1.0
    assert _raised(flags) == {"silent"}
    # Silent against silent: nothing differs.
    values, flags = m.measure(torch.zeros(1, RATE), RATE, torch.zeros(1, RATE))
    assert values["distance"] == 0.0
    assert _finite(values)
    assert _raised(flags) == {"silent", "unchanged"}


def test_a_faint_sound_is_silent_and_a_quiet_one_is_not():
    tone = q.sine(440, 1.0, RATE, dbfs=-65).unsqueeze(0)
    assert m.measure(tone, RATE, tone)[1]["silent"]
    tone = q.sine(440, 1.0, RATE, dbfs=-55).unsqueeze(0)
    assert not m.measure(tone, RATE, tone)[1]["silent"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_samples_are_flagged_and_read_as_zero(bad):
    unbent = _noise(1.0)
    audio = unbent.clone()
    where = torch.randperm(audio.numel(), generator=torch.Generator().manual_seed(0))[:441]
    audio[0, where] = bad
    values, flags = m.measure(audio, RATE, unbent)
    assert _finite(values)
    assert _raised(flags) == {"nonfinite"}  # and not unchanged, though most samples are
    zeroed = unbent.clone()
    zeroed[0, where] = 0.0
    assert values == m.measure(zeroed, RATE, unbent)[0]
    # All of it NaN: silent too, and still finite.
    values, flags = m.measure(torch.full((1, RATE), math.nan), RATE, unbent)
    assert _finite(values)
    assert _raised(flags) == {"nonfinite", "silent"}


def test_a_gain_of_4_on_a_sine_at_minus_6_dbfs_clips():
    tone = q.sine(440, 1.0, RATE, dbfs=-6).unsqueeze(0)
    assert not m.measure(tone, RATE, tone)[1]["clipping"]
    values, flags = m.measure(4 * tone, RATE, tone)
    assert values["peak_dbfs"] == pytest.approx(-6 + 20 * math.log10(4), abs=0.01)
    assert _raised(flags) == {"clipping"}


def test_a_few_overs_do_not_clip_and_opposite_channels_do():
    x = _noise(1.0)
    x[0, :40] = 1.0  # under 0.1 % of the samples
    assert not m.measure(x, RATE, x)[1]["clipping"]
    x[0, :100] = 1.0
    assert m.measure(x, RATE, x)[1]["clipping"]
    # Two channels at full scale in opposite phase: a silent mix, a clipping file.
    tone = q.sine(440, 1.0, RATE, dbfs=0) * 1.5
    values, flags = m.measure(torch.stack([tone, -tone]), RATE, torch.zeros(2, RATE))
    assert values["peak_dbfs"] == pytest.approx(20 * math.log10(1.5), abs=0.01)
    assert {"clipping", "silent"} <= _raised(flags)


def test_an_offset_is_flagged():
    x = _music()
    values, flags = m.measure(x + 0.1, RATE, x)
    assert values["dc"] == pytest.approx(0.1 + float(x.mean()), abs=1e-6)
    assert _raised(flags) == {"dc"}
    assert not m.measure(x + 0.04, RATE, x)[1]["dc"]
    assert m.measure(x - 0.06, RATE, x)[1]["dc"]


def test_a_copy_is_unchanged_at_distance_zero():
    x = _music()
    values, flags = m.measure(x.clone(), RATE, x)
    assert values["distance"] == 0.0
    assert _raised(flags) == {"unchanged"}
    assert m.measure(x + 5e-7, RATE, x)[1]["unchanged"]
    assert not m.measure(x + 1e-5 * _noise(2.0, seed=9, scale=1.0), RATE, x)[1]["unchanged"]


def test_distance_grows_with_gain_either_way():
    x = _music()
    for sign in (1, -1):
        distances = [
            m.measure(x * 10 ** (sign * db / 20), RATE, x)[0]["distance"]
            for db in (0.5, 1, 3, 6, 12, 24)
        ]
        assert distances == sorted(distances) and len(set(distances)) == len(distances)
    noise = _noise(2.0)
    quieter = m.measure(noise * 0.5, RATE, noise)[0]["distance"]
    assert quieter == pytest.approx(math.log(2), rel=0.02)


def test_distance_is_that_of_quality_spectral_distance():
    x = _music()
    for y in (0.5 * x, x + 0.05 * _noise(2.0, seed=4), torch.roll(x, 100, -1), x.clamp(-0.2, 0.2)):
        ours = m.measure(y, RATE, x)[0]["distance"]
        assert ours == pytest.approx(q.spectral_distance(y, x), abs=1e-5)


def test_values_are_json_serialisable():
    x = _music()
    nan = x.clone()
    nan[0, ::100] = math.nan
    huge = (x * 1e30, x.double() * 1e300, torch.full_like(x, 3e38))  # blown-up bendings
    for audio in (x, torch.zeros_like(x), nan, torch.full_like(x, math.inf), *huge):
        values, flags = m.measure(audio, RATE, x)
        text = json.dumps({"values": values, "flags": flags}, allow_nan=False)
        assert json.loads(text) == {"values": values, "flags": flags}
    # Loud but finite: the spectral measures are those of the signal at a sane level.
    values = m.measure(x * 1e30, RATE, x)[0]
    sane = m.measure(x * 1e3, RATE, x)[0]
    for key in ("centroid_hz", "flatness", "bandwidth_hz"):
        assert values[key] == pytest.approx(sane[key], rel=1e-4)
    assert values["peak_dbfs"] == pytest.approx(sane["peak_dbfs"] + 540, abs=1e-6)


def test_shapes_1_t_2_t_and_t_are_taken_and_mixed_to_mono():
    x = _music()
    mono = m.measure(x, RATE, x)
    assert m.measure(x[0], RATE, x[0]) == mono
    stereo = torch.cat([x, x])
    values, flags = m.measure(stereo, RATE, stereo)
    assert flags == mono[1]
    assert values == pytest.approx(mono[0], rel=1e-6, abs=1e-9)
    # Channels may differ between audio and unbent: the distance compares the mixes.
    values, flags = m.measure(stereo, RATE, x)
    assert values == pytest.approx(mono[0], rel=1e-6, abs=1e-9)
    assert flags["unchanged"]


def test_short_renders_are_measured():
    x = _noise(0.01)  # 441 samples, under one frame
    values, flags = m.measure(0.5 * x, RATE, x)
    assert _finite(values)
    assert values["distance"] > 0.1
    assert not _raised(flags)


def test_mismatched_lengths_raise_naming_both_shapes():
    with pytest.raises(ValueError, match=r"audio has shape \[2, 1000\], unbent \[999\]"):
        m.measure(torch.zeros(2, 1000), RATE, torch.zeros(999))


@pytest.mark.parametrize(
    ("audio", "rate", "message"),
    [
        (torch.zeros(1, 1, 100), RATE, r"\[channels, time\] or \[time\], got shape \[1, 1, 100\]"),
        (torch.zeros(1, 0), RATE, "empty"),
        (torch.zeros(1, 100, dtype=torch.int16), RATE, "floating-point"),
        (torch.zeros(1, 100), 0, "sample_rate"),
        (torch.zeros(1, 100), 44100.0, "sample_rate"),
    ],
)
def test_bad_inputs_raise(audio, rate, message):
    with pytest.raises(ValueError, match=message):
        m.measure(audio, rate, torch.zeros(audio.shape[-1]))
