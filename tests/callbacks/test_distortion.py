"""Tests of torchbend.callbacks.distortion."""

import math

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Invert, Quantize, Scale, SoftClip, Spread, Tanh
from torchbend.errors import BendingError


@pytest.mark.parametrize(
    "cb",
    [
        SoftClip(),
        SoftClip(0),
        Tanh(active=False),
        Quantize(),
        Quantize(0),
        Invert(active=False),
        Invert("one_minus", active=False),
        Spread(),
    ],
)
def test_neutral_setting_is_the_identity_bit_for_bit(cb):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb.register(ACT, x.shape, x.dtype, CPU)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_soft_clip_keeps_plus_minus_one_and_tends_to_the_identity():
    x = torch.linspace(-3, 3, 61)
    for drive in (0.5, 2.0, 10.0):
        out = SoftClip(drive)(x, ACT)
        torch.testing.assert_close(out, torch.tanh(drive * x) / math.tanh(drive))
        torch.testing.assert_close(out[[20, 40]], torch.tensor([-1.0, 1.0]))
        assert bool((out.abs() <= 1 / math.tanh(drive) + 1e-6).all())
    torch.testing.assert_close(SoftClip(1e-6)(x, ACT), x, atol=1e-6, rtol=1e-6)
    assert bool((SoftClip(20.0)(x[x.abs() > 0.5], ACT).abs() > 0.999).all())


def test_tanh_and_invert():
    x = signed_randn(3, 8)
    assert torch.equal(Tanh()(x, ACT), torch.tanh(x))
    assert torch.equal(Invert()(x, ACT), -x)
    assert torch.equal(Invert("one_minus")(x, ACT), 1 - x)


@pytest.mark.parametrize("n_bits", [1, 2, 3, 8])
def test_quantize_uses_2_power_bits_levels_over_the_range(n_bits):
    x = signed_randn(4, 256)
    x[0, 0] = 0.1  # not -0.0, halfway between two levels when they are an even number
    out = Quantize(n_bits)(x, ACT)
    peak = x.abs().max()
    levels = torch.linspace(-peak.item(), peak.item(), 2**n_bits)
    assert out.unique().numel() <= 2**n_bits
    nearest = levels[(x[..., None] - levels).abs().argmin(-1)]
    torch.testing.assert_close(out, nearest)


def test_quantize_leaves_zeros_alone_and_makes_integers_floating():
    assert torch.equal(Quantize(4)(torch.zeros(3), ACT), torch.zeros(3))
    assert Quantize(4)(torch.arange(3), ACT).dtype == torch.float32


def test_spread_scales_distances_to_the_mean_along_time():
    x = signed_randn(2, 3, 16)
    mean = x.mean(-1, keepdim=True)
    torch.testing.assert_close(Spread(1.0)(x, ACT), mean + 2 * (x - mean))
    torch.testing.assert_close(Spread(-1.0)(x, ACT), mean.expand_as(x))
    torch.testing.assert_close(Spread(1.0)(x, ACT).mean(-1), x.mean(-1))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SoftClip(-1.0), r"SoftClip: drive must be a finite number >= 0, got -1.0"),
        (lambda: Tanh(active=None), r"Tanh: active must be True or False, got None"),
        (lambda: Quantize(-1), r"Quantize: bits is a bit depth and must be an int >= 0, got -1"),
        (lambda: Quantize(2.5), r"Quantize: bits .* got 2.5"),
        (lambda: Quantize(33), r"Quantize: bits .* at most 32, got 33"),
        (lambda: Invert("neg"), r"Invert: mode must be one of 'sign', 'one_minus', got 'neg'"),
        (lambda: Spread(float("nan")), r"Spread: amount must be a finite number, got nan"),
    ],
)
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


@pytest.mark.parametrize(
    "cb", [SoftClip(2.0), Tanh(), Quantize(2), Invert(), Invert("one_minus"), Spread(0.5)]
)
def test_bend_weight_leaves_its_input_alone(cb):
    w = signed_randn(4, 3)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.tensor([0.5, 2.0])
    assert torch.equal((Scale(2.0) >> Invert())(x, ACT), torch.tensor([-1.0, -4.0]))
    assert torch.equal((Invert("one_minus") >> Scale(2.0))(x, ACT), torch.tensor([1.0, -2.0]))


def test_repr_shows_non_default_arguments_only():
    assert repr(SoftClip()) == "SoftClip()"
    assert repr(SoftClip(2)) == "SoftClip(drive=2.0)"
    assert repr(Tanh()) == "Tanh()"
    assert repr(Quantize(4)) == "Quantize(bits=4)"
    assert repr(Invert("one_minus", active=False)) == "Invert(mode='one_minus', active=False)"
    assert repr(Spread(-0.5)) == "Spread(amount=-0.5)"


@pytest.mark.parametrize(
    "cb",
    [SoftClip(2.0), SoftClip(), Tanh(), Tanh(False), Quantize(3), Quantize(), Invert(),
     Invert("one_minus"), Spread(0.5), Spread()],
)  # fmt: skip
def test_torchscript(cb):
    cb.register(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))
