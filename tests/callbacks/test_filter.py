"""Tests of torchbend.callbacks.filter."""

import math

import numpy as np
import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, ConvNet, bits, signed_randn

import torchbend as tb
from torchbend.callbacks import Filter
from torchbend.callbacks.filter import KINDS, biquad, biquad_coefficients
from torchbend.controls import BendingParameter
from torchbend.errors import BendingError


def recursion(x: torch.Tensor, c: list[float]) -> torch.Tensor:
    """The biquad's recursion, sample by sample in float64: the reference."""
    b0, b1, b2, a1, a2 = c
    rows = x.double().reshape(-1, x.shape[-1]).tolist()
    out = []
    for row in rows:
        x1 = x2 = y1 = y2 = 0.0
        ys = []
        for v in row:
            y = b0 * v + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2
            x2, x1, y2, y1 = x1, v, y1, y
            ys.append(y)
        out.append(ys)
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def response(c: list[float], f: float) -> float:
    """``|H(e^{2 pi i f})|`` of coefficients ``c``, from the transfer function."""
    z = np.exp(-2j * np.pi * f)
    b0, b1, b2, a1, a2 = c
    return abs((b0 + b1 * z + b2 * z**2) / (1 + a1 * z + a2 * z**2))


def amplitude(y: torch.Tensor, f: float, skip: int) -> torch.Tensor:
    """The amplitude of the sine of frequency ``f`` in ``y`` after ``skip`` samples (least
    squares on a sine and a cosine), for each row of ``y``."""
    t = torch.arange(y.shape[-1], dtype=torch.float64)[skip:]
    basis = torch.stack([torch.sin(2 * math.pi * f * t), torch.cos(2 * math.pi * f * t)], 1)
    fit = torch.linalg.lstsq(basis, y[..., skip:].double().reshape(-1, len(t)).T).solution
    return fit.norm(dim=0)


def sine(f: float, length: int = 4096, shape: tuple[int, ...] = (2, 3)) -> torch.Tensor:
    t = torch.arange(length, dtype=torch.float64)
    return torch.sin(2 * math.pi * f * t).expand(*shape, length).float()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("cutoff", "resonance"), [(0.1, 0.7071), (0.01, 4.0), (0.3, 0.3)])
@pytest.mark.parametrize("length", [1, 2, 63, 64, 65, 300])
def test_the_filter_is_the_recursion(kind, cutoff, resonance, length):
    c = biquad_coefficients(kind, cutoff, resonance)
    x = signed_randn(2, 3, length)
    y = Filter(kind, cutoff=cutoff, resonance=resonance)(x, ACT)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y.double(), recursion(x, c), rtol=1e-5, atol=1e-5)
    y64, _ = biquad(x.double(), c)
    torch.testing.assert_close(y64, recursion(x, c), rtol=1e-11, atol=1e-11)


def test_the_butterworth_low_pass_is_scipys():
    signal = pytest.importorskip("scipy.signal")
    b, a = signal.butter(2, 2 * 0.1)  # scipy's frequencies are fractions of Nyquist
    c = biquad_coefficients("lowpass", 0.1, 1 / math.sqrt(2))
    np.testing.assert_allclose(c, [*b, *a[1:]], rtol=1e-12, atol=1e-14)
    x = signed_randn(3, 1000).double()
    y, _ = biquad(x, c)
    np.testing.assert_allclose(y.numpy(), signal.lfilter(b, a, x.numpy()), atol=1e-12)


@pytest.mark.parametrize(
    ("kind", "passed", "stopped"),
    [
        ("lowpass", 0.01, 0.3),
        ("highpass", 0.3, 0.01),
        ("bandpass", 0.05, 0.4),
        ("bandstop", 0.4, 0.05),
    ],
)
def test_sines_pass_or_are_attenuated(kind, passed, stopped):
    # Cutoff (centre) 0.05 cycles per sample: a sine a decade away passes at about 1 or is
    # attenuated by more than 20 dB; the measured gains are the transfer function's.
    cb = Filter(kind, cutoff=0.05, resonance=0.7071)
    c = biquad_coefficients(kind, 0.05, 0.7071)
    for f, low, high in [(passed, 0.9, 1.01), (stopped, 0.0, 0.1)]:
        gain = amplitude(cb(sine(f), ACT), f, skip=1024)
        assert bool(((gain > low) & (gain < high)).all()), (f, gain)
        torch.testing.assert_close(gain, torch.full_like(gain, response(c, f)), atol=1e-4, rtol=0)


@pytest.mark.parametrize("kind", ["lowpass", "highpass"])
def test_the_resonance_is_the_gain_at_the_cutoff(kind):
    gain = amplitude(Filter(kind, cutoff=0.05, resonance=8.0)(sine(0.05), ACT), 0.05, 2048)
    torch.testing.assert_close(gain, torch.full_like(gain, 8.0), rtol=1e-3, atol=0)


def test_a_band_pass_peaks_at_1_and_a_band_stop_removes_its_centre():
    x = sine(0.1)
    band = amplitude(Filter("bandpass", cutoff=0.1, resonance=5.0)(x, ACT), 0.1, 2048)
    notch = amplitude(Filter("bandstop", cutoff=0.1, resonance=5.0)(x, ACT), 0.1, 2048)
    torch.testing.assert_close(band, torch.ones_like(band), rtol=1e-3, atol=0)
    assert bool((notch < 1e-3).all())


def test_the_filter_is_causal():
    x = signed_randn(2, 4, 200)
    changed = x.clone()
    changed[..., 120:] += 1.0
    cb = Filter("bandpass", cutoff=0.1, resonance=3.0)
    a, b = cb(x, ACT), cb(changed, ACT)
    assert torch.equal(a[..., :120], b[..., :120])
    assert not torch.equal(a[..., 120:], b[..., 120:])


def test_neutral_settings_are_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 50)
    w = signed_randn(8, 5)
    for cb in [Filter(mix=0.0), Filter("highpass", mix=0.0), Filter("lowpass", cutoff=0.5)]:
        cb.register(ACT, x.shape, x.dtype, CPU)
        cb.register(WEIGHT, w.shape, w.dtype, CPU)
        assert cb(x, ACT) is x or torch.equal(bits(cb(x, ACT)), bits(x))
        assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))
    assert torch.equal(Filter("bandstop", cutoff=0.5)(x, ACT), x)
    for kind in ("highpass", "bandpass"):
        assert torch.equal(Filter(kind, cutoff=0.5)(x, ACT), torch.zeros_like(x))


def test_mix_crossfades_dry_and_filtered():
    x = signed_randn(2, 4, 50)
    wet = Filter("lowpass", cutoff=0.05)(x, ACT)
    assert torch.equal(Filter("lowpass", cutoff=0.05, mix=1.0)(x, ACT), wet)
    half = Filter("lowpass", cutoff=0.05, mix=0.25)(x, ACT)
    torch.testing.assert_close(half, 0.75 * x + 0.25 * wet)


def test_activations_are_filtered_along_time_and_weights_along_their_last_axis():
    x = signed_randn(2, 3, 40)
    cb = Filter("highpass", cutoff=0.2, resonance=2.0)
    cb.register(ACT, x.shape, x.dtype, CPU)
    c = biquad_coefficients("highpass", 0.2, 2.0)
    torch.testing.assert_close(cb(x, ACT).double(), recursion(x, c), rtol=1e-5, atol=1e-5)
    w = signed_randn(6, 40)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    bent = cb.bend_weight(w, WEIGHT)
    torch.testing.assert_close(bent.double(), recursion(w, c), rtol=1e-5, atol=1e-5)
    assert torch.equal(w, signed_randn(6, 40))  # the weight itself is untouched


def test_dim_filters_another_axis():
    x = signed_randn(2, 30, 5)
    cb = Filter("lowpass", cutoff=0.1, dim=-2)
    expected = Filter("lowpass", cutoff=0.1)(x.transpose(-1, -2), ACT).transpose(-1, -2)
    assert torch.equal(cb(x, ACT), expected)


def test_carry_streams_blocks_as_one_call():
    x = signed_randn(2, 3, 1000)
    whole = Filter("bandpass", cutoff=0.01, resonance=6.0)(x, ACT)
    streaming = Filter("bandpass", cutoff=0.01, resonance=6.0, carry=True)
    streaming.register(ACT, torch.Size([2, 3, 100]), torch.float32, CPU)
    blocks = [streaming(block, ACT) for block in x.split(100, -1)]
    torch.testing.assert_close(torch.cat(blocks, -1), whole, rtol=1e-5, atol=1e-5)
    # Without carry each block starts from rest: the stream differs.
    plain = Filter("bandpass", cutoff=0.01, resonance=6.0)
    restarted = torch.cat([plain(block, ACT) for block in x.split(100, -1)], -1)
    assert not torch.allclose(restarted, whole, atol=1e-3)
    streaming.reset()
    torch.testing.assert_close(streaming(x[..., :100], ACT), whole[..., :100])


def test_carry_starts_from_rest_for_other_sizes_and_keeps_its_state():
    cb = Filter("lowpass", cutoff=0.05, carry=True)
    cb.register(ACT, torch.Size([1, 2, 8]), torch.float32, CPU)
    cb(signed_randn(1, 2, 8), ACT)
    state = cb.state(ACT).clone()
    other = signed_randn(3, 2, 8)
    assert torch.equal(cb(other, ACT), Filter("lowpass", cutoff=0.05)(other, ACT))
    assert torch.equal(cb.state(ACT), state)


def test_carry_runs_at_mix_0_so_that_raising_it_finds_a_settled_filter():
    x = signed_randn(1, 2, 200)
    mix = BendingParameter("mix", 0.0)
    cb = Filter("lowpass", cutoff=0.05, mix=mix, carry=True)
    cb.register(ACT, x.shape, x.dtype, CPU)
    for _ in range(2):
        assert torch.equal(bits(cb(x[..., :100], ACT)), bits(x[..., :100]))
    mix.set(1.0)
    whole = Filter("lowpass", cutoff=0.05)(torch.cat([x[..., :100], x[..., :100], x], -1), ACT)
    torch.testing.assert_close(cb(x, ACT), whole[..., 200:], rtol=1e-5, atol=1e-5)


def test_scripted_carry_streams_as_in_python():
    def make():
        cb = Filter("highpass", cutoff=0.1, resonance=3.0, carry=True)
        cb.register(ACT, torch.Size([2, 3, 32]), torch.float32, CPU)
        return cb

    eager, scripted = make(), torch.jit.script(make())
    x = signed_randn(2, 3, 96)
    for block in x.split(32, -1):
        assert torch.equal(bits(scripted(block, ACT)), bits(eager(block, ACT)))


def test_a_ramping_mix_spreads_along_time():
    mix = BendingParameter("mix", 0.0, ramp=1)
    cb = Filter("lowpass", cutoff=0.05, mix=mix)
    x = signed_randn(2, 3, 100)
    mix.set(1.0)
    wet = Filter("lowpass", cutoff=0.05)(x, ACT)
    ramp = torch.linspace(0.0, 1.0, 101)[1:]
    torch.testing.assert_close(cb(x, ACT), x + (wet - x) * ramp)


def test_controls_refuse_values_out_of_bounds():
    cutoff = BendingParameter("cutoff", 0.1)
    cb = Filter(cutoff=cutoff)
    with pytest.raises(BendingError, match=r"Filter.cutoff .* between 0.0001 and 0.5"):
        cutoff.set(0.7)
    assert cb.cutoff == 0.1
    clamped = BendingParameter("clamped", 0.1, clamp=True)
    cb = Filter(cutoff=clamped, mix=1.0)
    clamped.set(0.9)
    assert cb.cutoff == 0.5


def test_integers_are_filtered_as_floats():
    y = Filter("lowpass", cutoff=0.1)(torch.ones(1, 8, dtype=torch.long), ACT)
    assert y.dtype == torch.float32


def test_large_inputs_are_filtered_exactly():
    # Many chunks: the scan across them carries the state as the recursion does.
    x = signed_randn(2, 5000)
    c = biquad_coefficients("lowpass", 0.002, 10.0)
    y = Filter("lowpass", cutoff=0.002, resonance=10.0)(x, ACT)
    expected = recursion(x, c)
    assert float((y.double() - expected).abs().max() / expected.abs().max()) < 1e-5


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Filter("notch"), r"Filter: kind must be one of 'lowpass', .* got 'notch'"),
        (lambda: Filter(cutoff=0.0), r"Filter: cutoff is a frequency .* between 0.0001 and 0.5"),
        (lambda: Filter(cutoff=0.6), r"Filter: cutoff .* got 0.6"),
        (lambda: Filter(resonance=0.0), r"Filter: resonance is a quality factor .* got 0.0"),
        (lambda: Filter(mix=1.5), r"Filter: mix .* between 0 and 1, got 1.5"),
        (lambda: Filter(dim=0.5), r"Filter: dim must be an int .* got 0.5"),
        (lambda: Filter(carry=1), r"Filter: carry must be True or False, got 1"),
    ],
)
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


def test_targets_without_time_are_refused():
    with pytest.raises(BendingError, match=r"'conv.bias' of shape \[4\]: it filters along time"):
        Filter().register("conv.bias", torch.Size([4]), torch.float32, CPU)
    with pytest.raises(BendingError, match=r"dim=-3 is out of range"):
        Filter(dim=-3).register(ACT, torch.Size([4, 8]), torch.float32, CPU)
    cb = Filter()
    with pytest.raises(BendingError, match="a bias, a scalar"):
        cb.register("conv.bias", torch.Size([4]), torch.float32, CPU)
    assert "conv.bias" not in cb._targets


def test_a_bended_model_exports_a_live_cutoff():
    torch.manual_seed(0)
    bended = tb.BendedModule(ConvNet())
    bended.trace(x=torch.randn(1, 1, 64))
    cutoff = BendingParameter("cutoff", 0.1, range=(0.01, 0.5))
    bended.bend(Filter("lowpass", cutoff=cutoff, resonance=2.0), "tanh$")
    bended.bend(Filter("highpass", cutoff=0.05), r"out\.weight")
    scripted = tb.export.torchscript(bended)
    x = torch.randn(2, 1, 64)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))
        assert scripted.set_cutoff(0.02) == 0
        bended.update("cutoff", 0.02)
        assert torch.equal(scripted(x), bended(x))


@pytest.mark.audio
def test_a_carried_filter_streams_the_shipped_model_as_offline():
    # tiny_rave streamed by blocks of 128 samples, a filter on a decoder activation: with
    # carry, the stream equals one offline call; from rest at each block, it does not.
    torch.manual_seed(0)
    x = torch.randn(1, 1, 1024) * 0.1
    pattern = "forward:decoder_0$"
    diffs = {}
    for carry in (True, False):
        offline = tb.BendedModule(tb.models.load("tiny_rave"))
        offline.trace(x=x)
        streaming = tb.BendedModule(tb.models.load("tiny_rave").set_streaming(True))
        streaming.trace(x=torch.zeros(1, 1, 128))
        for bended in (offline, streaming):
            bended.bend(Filter("lowpass", cutoff=0.05, resonance=3.0, carry=carry), pattern)
        with torch.no_grad():
            expected = offline(x)[0]
        stream = tb.audio.Stream(streaming, block_size=128)
        stream.reset()
        diffs[carry] = float((stream.process(x[0]) - expected).abs().max())
    assert diffs[True] < 1e-5
    assert diffs[False] > 1e-2
