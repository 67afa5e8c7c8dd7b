"""Tests for torchbend.audio.safety: the guard, the DC blocker, the limiter, their state and
report, scripting, and the safety stage of Stream."""

from __future__ import annotations

import copy
import io
import math
import pickle

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.audio.safety import CEILING, FILE_CEILING, Safety
from torchbend.audio.safety_stats import SafetyStats, decibels
from torchbend.audio.stream import Stream
from torchbend.errors import AudioError

pytestmark = pytest.mark.audio

RATE = 44100


def noise(*shape: int, seed: int = 0, scale: float = 0.1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def wild(seed: int = 0) -> torch.Tensor:
    """Two channels of everything at once: quiet noise, a DC offset, a blow-up, NaN and
    infinities, then quiet again."""
    x = noise(2, 30000, seed=seed) + 0.2
    x[:, 6000:12000] *= 1e6
    x[0, 13000] = float("nan")
    x[1, 13001:13004] = float("inf")
    x[1, 20000] = -float("inf")
    x[0, 25000] = 1e30
    return x


def streamed(stage: nn.Module, x: torch.Tensor, block: int) -> torch.Tensor:
    return torch.cat([stage(x[..., i : i + block]) for i in range(0, x.shape[-1], block)], -1)


def test_nonfinite_samples_become_silence_and_are_counted() -> None:
    x = noise(3, 2048)
    x[0, 10] = float("nan")
    x[1, 20:25] = float("inf")
    x[2, -1] = -float("inf")
    safety = Safety(RATE)
    y = safety(x)
    assert y.isfinite().all() and y.abs().max() <= 1
    silenced = Safety(RATE, dc=False)(x)
    assert silenced[0, 10] == 0 and (silenced[1, 20:25] == 0).all() and silenced[2, -1] == 0
    stats = safety.stats
    assert (stats.blocks, stats.guarded_blocks, stats.nonfinite) == (1, 1, 7)
    assert "guarded 1 blocks (7 NaN or infinite samples silenced)" in str(stats)
    safety(noise(3, 2048))
    assert (safety.stats.blocks, safety.stats.guarded_blocks) == (2, 1)


def test_the_guard_fades_back_in_over_fade_seconds() -> None:
    fade = 0.01
    samples = round(fade * RATE)
    safety = Safety(RATE, dc=False, limit=False, fade=fade)
    x = torch.full((1, 1024), 0.5)
    x[0, 100] = float("nan")
    first, second = safety(x[:, :512]), safety(x[:, 512:])  # the fade crosses blocks
    y = torch.cat([first, second], -1)[0]
    assert torch.equal(y[:100], x[0, :100])  # no look-ahead: untouched before
    ramp = 0.5 * torch.arange(samples, dtype=torch.float32) / samples
    assert torch.allclose(y[100 : 100 + samples], ramp, atol=1e-7)
    assert torch.equal(y[100 + samples :], x[0, 100 + samples :])
    assert torch.equal(Safety(RATE, dc=False, limit=False, fade=0.0)(x)[0, 101:], x[0, 101:])


@pytest.mark.parametrize("gain", [1e6, 1e30, 3e38])
def test_a_blow_up_never_leaves_full_scale(gain: float) -> None:
    safety = Safety(RATE)
    for seed in range(4):
        y = safety(noise(2, 4096, seed=seed, scale=1.0) * gain)
        assert y.isfinite().all() and y.abs().max() <= 1.0
    stats = safety.stats
    assert stats.limited_blocks == 4 and stats.limited_samples > 0
    assert stats.max_reduction_db > 10
    assert "limited 4 blocks" in str(stats)


def test_a_blow_up_is_over_within_a_fraction_of_a_second() -> None:
    """One 1e30 sample does not hold the gain down (nor the DC blocker's output up) for
    seconds: it counts as the ceiling, +20 dBFS, which the release forgets in
    ``release * ln(2 * ceiling / threshold)`` (twice: the DC blocker's step) and the DC
    blocker in a few of its time constants."""
    clean = noise(1, RATE, scale=0.3)
    spike, huge = clean.clone(), clean.clone()
    spike[0, 1000], huge[0, 1000] = 1e30, 1e6
    y = Safety(RATE)(spike)[0]
    assert torch.equal(y, Safety(RATE)(huge)[0])  # both at the ceiling
    assert y[1000] == pytest.approx(1.0)
    after = 1000 + int(0.1 * math.log(2 * CEILING / 0.8) * RATE) + 1
    assert after < RATE // 2
    assert torch.allclose(y[after:], Safety(RATE)(clean)[0, after:], atol=1e-6)


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.99])
def test_below_the_threshold_the_stage_without_dc_is_the_identity(threshold: float) -> None:
    safety = Safety(RATE, dc=False, threshold=threshold)
    for seed in range(3):
        x = noise(2, 1000, seed=seed, scale=1.0).clamp(-threshold, threshold) * 0.999
        assert torch.equal(safety(x), x)
    assert not safety.stats.acted
    assert "nothing guarded or limited" in str(safety.stats)


def test_below_the_threshold_only_the_dc_blocker_acts() -> None:
    x = noise(2, 10000, scale=0.1) + 0.05
    assert torch.equal(Safety(RATE)(x), Safety(RATE, limit=False)(x))


def test_the_limiter_curve_is_unity_then_a_smooth_monotonic_knee_below_one() -> None:
    levels = torch.tensor([0.1, 0.5, 0.79, 0.81, 0.9, 1.0, 1.2, 1.5])
    out = []
    for level in levels:
        # A constant level: the envelope is the level, the output its f(level).
        safety = Safety(RATE, dc=False)
        out.append(safety(torch.full((1, 512), float(level)))[0, -1])
    curve = torch.stack(out)
    below = levels < 0.8
    assert torch.equal(curve[below], levels[below])
    assert (curve.diff() > 0).all() and (curve < 1).all()
    knee = 0.8 + 0.2 * torch.tanh((levels[~below] - 0.8) / 0.2)
    assert torch.allclose(curve[~below], knee, atol=1e-6)
    assert Safety(RATE, dc=False)(torch.full((1, 512), 9.0)).max() <= 1


def test_the_limiter_releases_the_gain_after_a_peak() -> None:
    safety = Safety(RATE, dc=False, release=0.05)
    x = torch.full((1, RATE), 0.5)
    x[0, 0] = 2.0
    y = safety(x)[0]
    gain = y / x[0]
    assert gain[1] < 0.6 and (gain.diff()[1:] >= -1e-6).all()  # released, never pumped down
    assert gain[int(0.05 * math.log(2.0 / 0.8) * RATE) + 10 :].eq(1).all()  # back to unity


def test_dc_is_removed() -> None:
    t = torch.arange(2 * RATE) / RATE
    x = (0.3 * torch.sin(2 * math.pi * 220 * t) + 0.5)[None]
    safety = Safety(RATE)
    y = streamed(safety, x, 2048)
    tail = y[0, -RATE // 2 :]
    assert abs(float(tail.mean())) < 1e-3
    rms = float(tail.square().mean().sqrt())
    assert rms == pytest.approx(0.3 / math.sqrt(2), rel=2e-3)  # 220 Hz goes through
    assert safety.stats.max_dc == pytest.approx(0.5, abs=0.02)
    assert "DC offset up to 0.5" in str(safety.stats)


def test_the_dc_blocker_is_a_one_pole_high_pass() -> None:
    cutoff = 20.0
    a = math.exp(-2 * math.pi * cutoff / RATE)
    x = noise(2, 5000, scale=0.2, seed=3).double() + 0.3
    expected = torch.zeros_like(x)
    before, y = torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    for n in range(x.shape[-1]):
        y = x[:, n] - before + a * y
        before = x[:, n]
        expected[:, n] = y
    safety = Safety(RATE, guard=False, limit=False, cutoff=cutoff)
    # Its coefficients are float32 numbers, whatever the input's dtype.
    assert torch.allclose(safety(x), expected, atol=1e-6, rtol=0)
    got = Safety(RATE, limit=False, cutoff=cutoff)(x.float())
    assert torch.allclose(got, expected.float(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("block", [64, 777, 2048, 4096, 5000])
def test_streaming_by_blocks_is_one_pass(block: int) -> None:
    x = wild()
    whole, blocks = Safety(RATE), Safety(RATE)
    one = whole(x)
    by_blocks = streamed(blocks, x, block)
    assert torch.allclose(by_blocks, one, atol=2e-6, rtol=0)
    assert by_blocks.isfinite().all() and by_blocks.abs().max() <= 1
    a, b = whole.stats, blocks.stats
    assert a.nonfinite == b.nonfinite == 5
    assert abs(a.limited_samples - b.limited_samples) <= 2  # rounding, at the threshold
    assert a.max_reduction_db == pytest.approx(b.max_reduction_db, rel=1e-5)


def test_scripted_is_eager() -> None:
    eager, scripted = Safety(RATE), torch.jit.script(Safety(RATE))
    x = wild(seed=1)
    for start in range(0, x.shape[-1], 2048):
        block = x[:, start : start + 2048]
        torch.testing.assert_close(scripted(block), eager(block), atol=1e-6, rtol=0)
    for name in ("blocks", "guarded_blocks", "nonfinite", "limited_blocks", "limited_samples"):
        assert getattr(scripted, name) == getattr(eager, name)
    scripted.reset()
    assert scripted.blocks == 0 and scripted.dc_state.numel() == 0
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer)
    assert torch.equal(loaded(x[:, :2048]), Safety(RATE)(x[:, :2048]))


def test_state_starts_over_when_the_channels_change_and_at_reset() -> None:
    safety = Safety(RATE)
    x = noise(2, 1024) + 0.5
    first = safety(x)
    assert not torch.equal(safety(x), first)  # the DC blocker goes on
    assert torch.equal(safety(x[:1]), Safety(RATE)(x[:1]))  # one channel now: fresh
    safety.reset()
    assert torch.equal(safety(x[:1]), Safety(RATE)(x[:1]))
    assert safety.stats.blocks == 1
    safety.reset(state=False)
    assert safety.stats == SafetyStats(0, 0, 0, 0, 0, 0.0, 0.0)
    assert torch.equal(safety(torch.zeros(1, 0)), torch.zeros(1, 0))


def test_any_leading_shape_and_dtype() -> None:
    x = noise(2, 3, 500) * 10
    y = Safety(RATE)(x)
    assert y.shape == x.shape and y.abs().max() <= 1
    assert torch.allclose(y[1, 2], Safety(RATE)(x[1, 2][None])[0], atol=1e-6)  # its own
    double = Safety(RATE)(x.double())
    assert double.dtype == torch.float64
    assert torch.allclose(double.float(), y, atol=1e-5)


def test_parts_turn_off() -> None:
    x = noise(1, 2048, scale=3.0) + 1.0
    x[0, 5] = float("nan")
    off = Safety(RATE, guard=False, dc=False, limit=False)(x)
    assert torch.equal(off[:, 6:], x[:, 6:]) and off[0, 5].isnan()
    unlimited = Safety(RATE, limit=False)(x)
    assert unlimited.abs().max() > 1 and unlimited.isfinite().all()
    unguarded = Safety(RATE, guard=False, dc=False)(x)
    assert unguarded[0, 5].isnan() and unguarded[:, 6:].abs().max() <= 1


def test_pickle_and_copy_keep_settings_and_state() -> None:
    safety = Safety(48000, threshold=0.5, release=0.2, cutoff=15.0, fade=0.0)
    safety(noise(1, 2048) + 0.3)
    for other in (copy.deepcopy(safety), pickle.loads(pickle.dumps(safety))):
        assert repr(other) == repr(safety)
        x = noise(1, 2048, seed=5)
        assert torch.equal(other(x), copy.deepcopy(safety)(x))


def test_repr_shows_what_is_not_default() -> None:
    assert repr(Safety()) == "Safety(44100)"
    assert repr(Safety(48000, dc=False, threshold=0.5)) == "Safety(48000, dc=False, threshold=0.5)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_rate": 0}, "sample_rate must be a positive int of Hz, got 0"),
        ({"sample_rate": 44100.0}, "got 44100.0"),
        ({"threshold": 1.0}, "threshold must be between 0 and 1, got 1.0"),
        ({"threshold": 0}, "threshold must be between 0 and 1, got 0"),
        ({"release": 0.0}, "release must be 0 to 10 seconds"),
        ({"cutoff": 20000.0}, r"cutoff must be 0 to 11025 Hz \(not 0\), got 20000.0"),
        ({"fade": -1.0}, "fade must be 0 to 10 seconds, got -1.0"),
        ({"dc": 1}, "dc must be True or False, got 1"),
        ({"release": "fast"}, "got 'fast'"),
    ],
)
def test_bad_settings_say_what_and_the_bound(kwargs: dict, message: str) -> None:
    with pytest.raises(AudioError, match=message):
        Safety(**kwargs)


# -- the safety stage of Stream -------------------------------------------------------------


def blown_up_tiny_rave(block: int = 2048) -> tb.BendedModule:
    model = tb.models.load("tiny_rave")
    model.set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, block))
    bended.bend(tb.Scale(1e6), "decoder_1$")
    return bended


def test_stream_with_safety_keeps_a_blown_up_model_within_full_scale() -> None:
    bended = blown_up_tiny_rave()
    x = noise(1, 5 * 2048, scale=0.1)
    raw = Stream(bended, block_size=2048)
    raw.reset()
    loud = raw.process(x)
    assert loud.abs().max() > 10 and raw.stats.safety is None
    safe = Stream(bended, block_size=2048, safety=True)
    safe.reset()
    y = safe.process(x)
    assert y.isfinite().all() and y.abs().max() <= 1
    stats = safe.stats.safety
    assert stats is not None and stats.limited_blocks == 5 and stats.max_reduction_db > 20
    assert "; safety: limited 5 blocks" in str(safe.stats)
    # The stage runs on the model's output as it comes: the same as after it, in one pass.
    assert torch.allclose(y, Safety(RATE)(loud), atol=1e-6)


def test_stream_without_safety_is_exact_and_with_it_only_removes_dc() -> None:
    x = noise(1, 3000, scale=0.1)
    plain = Stream(nn.Identity(), block_size=256)
    assert torch.equal(plain.process(x), x) and plain.stats.safety is None
    assert "safety" not in str(plain.stats)
    stage = Safety(RATE, dc=False)
    safe = Stream(nn.Identity(), block_size=256, safety=stage)
    assert safe.safety is stage
    assert torch.equal(safe.process(x), x)
    assert str(safe.stats).endswith(
        "; safety: nothing guarded or limited, DC offset up to 0 removed"
    )
    safe.reset(cache=False)
    assert safe.stats.safety == SafetyStats(0, 0, 0, 0, 0, 0.0, 0.0)
    assert "safety=Safety(44100, dc=False)" in repr(safe)


def test_stream_safety_settings_are_checked() -> None:
    with pytest.raises(AudioError, match=r"safety stage works at 48000 Hz and the stream at 44100"):
        Stream(nn.Identity(), safety=Safety(48000))
    with pytest.raises(AudioError, match=r"safety must be True, False or a tb\.audio\.Safety"):
        Stream(nn.Identity(), safety="on")  # type: ignore[arg-type]
    assert Stream(nn.Identity(), sample_rate=48000, safety=True).safety.sample_rate == 48000


def test_a_ceiling_keeps_every_sample_below_it_in_python_and_torchscript() -> None:
    """Files for listening take ``ceiling=FILE_CEILING``: a loud passage comes out below full
    scale (the curve at the default ceiling reaches 1.0 itself in float32), sound below the
    threshold still untouched."""
    loud = torch.full((1, 512), 9.0)
    assert Safety(RATE, dc=False)(loud).max() == 1.0  # full scale: a 16-bit file's 32767
    for stage in (Safety(RATE, ceiling=FILE_CEILING), torch.jit.script(Safety(RATE, ceiling=0.9))):
        ceiling = stage.ceiling
        y = stage(wild())
        assert bool(y.isfinite().all()) and float(y.abs().max()) <= ceiling
        assert float(y.abs().max()) > ceiling - 0.01  # it tends to the ceiling
    quiet = noise(2, 4096, scale=0.1)
    assert torch.equal(Safety(RATE, dc=False, ceiling=FILE_CEILING)(quiet), quiet)
    assert "ceiling=0.9" in repr(Safety(RATE, ceiling=0.9))
    with pytest.raises(AudioError, match=r"ceiling must be above threshold 0.8, up to 1, got 0.8"):
        Safety(RATE, ceiling=0.8)


def test_stats_say_the_peak_in_and_how_long_the_limiter_acted() -> None:
    x = noise(2, RATE, scale=0.1)
    x[0, 1000:1441] = 2.0  # 10 ms at +6 dBFS on one channel...
    x[1, 1000:1441] = -2.0  # ...and at the same time on the other
    stage = Safety(RATE, dc=False, release=0.001)
    stage(x)
    stats = stage.stats
    assert stats.peak == 2.0
    # the 10 ms, then the release (1 ms a time constant) from +6 dB down to the threshold
    assert 0.010 <= stats.limited_seconds <= 0.010 + 0.001 * math.log(2 / 0.8) + 1e-3
    assert f"{1000 * stats.limited_seconds:.1f} ms above the threshold" in str(stats)
    assert "peak in +6.0 dBFS" in str(stats)
    assert decibels(0.0) == "silence" and decibels(10 ** (-0.3 / 20)) == "-0.3 dBFS"
