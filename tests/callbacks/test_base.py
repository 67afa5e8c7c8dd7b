"""Tests of torchbend.callbacks.base across every callback: arguments, live controls, ramps."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch
from callback_helpers import ACT, CPU, bits, signed_randn

from torchbend.callbacks import (
    Ablate,
    Affine,
    BendingCallback,
    Bias,
    Chain,
    Clamp,
    Dilate,
    Erode,
    Flip,
    Invert,
    Lambda,
    Mask,
    Noise,
    Offset,
    Permute,
    Quantize,
    Randomize,
    Roll,
    Scale,
    SoftClip,
    Spread,
    Tanh,
    Threshold,
    ThresholdActivation,
    TimeStretch,
)
from torchbend.controls import BendingParameter

SHAPE = torch.Size([2, 4, 16])


def registered(cb: BendingCallback, shape: torch.Size = SHAPE) -> BendingCallback:
    cb.register(ACT, shape, torch.float32, CPU)
    return cb


# Every callback class with non-default arguments (seeded where it draws), for round trips.
BUILT: list[Callable[[], BendingCallback]] = [
    lambda: Mask(prob=0.5, dim=-2, seed=1),
    lambda: Bias(0.5),
    lambda: Scale(-2.0),
    lambda: Affine(2.0, 0.5),
    lambda: Noise(std=0.5, op="mul", dim=(-2, -1), seed=2),
    lambda: Permute(dim=-2, seed=3, amount=0.5),
    lambda: Clamp(min=-0.5, max=0.25),
    lambda: Lambda(torch.sin),
    lambda: Roll(0.25, dim=-1),
    lambda: Flip(dim=(-2, -1), active=True),
    lambda: TimeStretch(0.75),
    lambda: Threshold(0.5),
    lambda: ThresholdActivation(keep=0.5, dim=-2),
    lambda: Erode(3),
    lambda: Dilate(4),
    lambda: SoftClip(2.0),
    lambda: Tanh(active=True),
    lambda: Quantize(bits=3),
    lambda: Invert("one_minus"),
    lambda: Spread(0.5),
    lambda: Ablate(channels=[0], fraction=0.25, dim=-2, seed=4),
    lambda: Randomize(fraction=0.5, std=2.0, seed=5),
    lambda: Offset(0.5, dim=-2, seed=6),
]


@pytest.mark.parametrize("make", BUILT, ids=lambda make: type(make()).__name__)
def test_arguments_rebuild_the_same_callback(make):
    cb = make()
    again = type(cb)(**cb.arguments())
    assert repr(again) == repr(cb)
    x = signed_randn(*SHAPE)
    assert torch.equal(bits(registered(again)(x, ACT)), bits(registered(cb)(x, ACT)))


def test_arguments_keep_controls_as_themselves():
    p = BendingParameter("p", 0.5)
    cb = Affine(scale=2.0 * p, bias=p)
    args = cb.arguments()
    assert args["bias"] is p and args["scale"].control is p
    again = Affine(**args)
    assert repr(again) == repr(cb) == "Affine(scale=2.0 * p + 0.0, bias=p)"
    assert again.controls() == [p]


def test_chain_arguments_rebuild_the_same_chain():
    chain = Scale(2.0) >> Bias(1.0)
    again = Chain(*chain.arguments()["callbacks"])
    assert repr(again) == repr(chain)


# (make a callback from an argument's value, the value given to a control, the new value):
# a control at the first value, set to the second, must bend as the plain second value does.
CONTROLLED: list[tuple[str, Callable[[Any], BendingCallback], float, float]] = [
    ("Mask.prob", lambda v: Mask(prob=v, dim=-1, seed=0), 0.2, 0.7),
    ("Mask.seed", lambda v: Mask(prob=0.5, seed=v), 0, 1),
    ("Bias.bias", lambda v: Bias(v), 0.0, 0.5),
    ("Scale.scale", lambda v: Scale(v), 1.0, -3.0),
    ("Affine.scale", lambda v: Affine(scale=v, bias=0.5), 1.0, 2.0),
    ("Affine.bias", lambda v: Affine(scale=2.0, bias=v), 0.0, -1.0),
    ("Noise.std", lambda v: Noise(std=v, seed=0), 0.0, 0.5),
    ("Noise.seed", lambda v: Noise(std=0.5, seed=v), 0, 3),
    ("Permute.amount", lambda v: Permute(seed=0, amount=v), 0.0, 0.5),
    ("Permute.seed", lambda v: Permute(seed=v), 0, 1),
    ("Clamp.min", lambda v: Clamp(min=v), -1.0, 0.0),
    ("Clamp.max", lambda v: Clamp(min=-0.5, max=v), 1.0, 0.25),
    ("Roll.shift", lambda v: Roll(v), 0.0, 0.5),
    ("Flip.active", lambda v: Flip(active=v), False, True),
    ("TimeStretch.factor", lambda v: TimeStretch(v), 1.0, 0.5),
    ("Threshold.value", lambda v: Threshold(v), 0.0, 0.5),
    ("ThresholdActivation.keep", lambda v: ThresholdActivation(v), 1.0, 0.5),
    ("Erode.size", lambda v: Erode(v), 1, 3),
    ("Dilate.size", lambda v: Dilate(v), 1, 5),
    ("SoftClip.drive", lambda v: SoftClip(v), 0.0, 3.0),
    ("Tanh.active", lambda v: Tanh(v), False, True),
    ("Quantize.bits", lambda v: Quantize(v), 0, 2),
    ("Invert.active", lambda v: Invert(active=v), False, True),
    ("Spread.amount", lambda v: Spread(v), 0.0, 1.0),
    ("Ablate.fraction", lambda v: Ablate(fraction=v, seed=0), 0.0, 0.5),
    ("Ablate.seed", lambda v: Ablate(fraction=0.5, seed=v), 0, 1),
    ("Randomize.fraction", lambda v: Randomize(fraction=v, seed=0), 0.0, 0.5),
    ("Randomize.std", lambda v: Randomize(fraction=0.5, std=v, seed=0), 1.0, 3.0),
    ("Randomize.seed", lambda v: Randomize(fraction=0.5, seed=v), 0, 1),
    ("Offset.offset", lambda v: Offset(v, seed=0), 0.0, 0.5),
    ("Offset.seed", lambda v: Offset(0.5, seed=v), 0, 1),
]


@pytest.mark.parametrize(("make", "before", "after"), [c[1:] for c in CONTROLLED],
                         ids=[c[0] for c in CONTROLLED])  # fmt: skip
def test_a_control_drives_the_argument(make, before, after):
    control = BendingParameter("knob", before)
    cb = registered(make(control))
    assert cb.controls() == [control]
    x = signed_randn(*SHAPE)
    assert torch.equal(bits(cb(x, ACT)), bits(registered(make(before))(x, ACT)))
    control.set(after)
    cb.control_changed()
    assert torch.equal(bits(cb(x, ACT)), bits(registered(make(after))(x, ACT)))
    w = signed_randn(*SHAPE) * 2.0
    expected = registered(make(after)).bend_weight(w, ACT)
    assert torch.equal(bits(cb.bend_weight(w, ACT)), bits(expected))


# Callbacks whose argument, given as a control at the neutral value, makes them the identity.
NEUTRAL: list[tuple[str, Callable[[Any], BendingCallback], float]] = [
    ("Mask", lambda p: Mask(prob=p), 0.0),
    ("Bias", lambda p: Bias(p), 0.0),
    ("Scale", lambda p: Scale(p), 1.0),
    ("Affine", lambda p: Affine(scale=p), 1.0),
    ("Noise", lambda p: Noise(std=p), 0.0),
    ("Permute", lambda p: Permute(amount=p), 0.0),
    ("Roll", lambda p: Roll(p), 0.0),
    ("Flip", lambda p: Flip(active=p), False),
    ("TimeStretch", lambda p: TimeStretch(p), 1.0),
    ("Threshold", lambda p: Threshold(p), 0.0),
    ("ThresholdActivation", lambda p: ThresholdActivation(p), 1.0),
    ("Erode", lambda p: Erode(p), 1),
    ("Dilate", lambda p: Dilate(p), 1),
    ("SoftClip", lambda p: SoftClip(p), 0.0),
    ("Tanh", lambda p: Tanh(p), False),
    ("Quantize", lambda p: Quantize(p), 0),
    ("Invert", lambda p: Invert(active=p), False),
    ("Spread", lambda p: Spread(p), 0.0),
    ("Ablate", lambda p: Ablate(fraction=p), 0.0),
    ("Randomize", lambda p: Randomize(fraction=p), 0.0),
    ("Offset", lambda p: Offset(p), 0.0),
]


@pytest.mark.parametrize(("make", "neutral"), [c[1:] for c in NEUTRAL],
                         ids=[c[0] for c in NEUTRAL])  # fmt: skip
def test_a_control_at_the_neutral_setting_is_the_identity(make, neutral):
    cb = registered(make(BendingParameter("knob", neutral)))
    x = signed_randn(*SHAPE)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(x, ACT)), bits(x))


def test_seed_control_redraws_reproducibly():
    seed = BendingParameter("seed", 0)
    mask = registered(Mask(prob=0.5, seed=seed))
    first = mask.state(ACT).clone()
    seed.set(1)
    mask.control_changed()
    assert not torch.equal(mask.state(ACT), first)
    seed.set(0)
    mask.control_changed()
    assert torch.equal(mask.state(ACT), first)


def test_mask_prob_control_keeps_the_noise_and_nests_the_masks():
    prob = BendingParameter("prob", 0.2)
    mask = registered(Mask(prob=prob), torch.Size([1000]))
    low = mask.state(ACT).clone()
    prob.set(0.6)
    mask.control_changed()
    high = mask.state(ACT)
    assert bool(((high == 1) <= (low == 1)).all())
    assert abs((high == 0).float().mean().item() - 0.6) < 0.06


def test_ablate_fraction_control_nests_the_channels():
    fraction = BendingParameter("fraction", 0.25)
    ablate = registered(Ablate(fraction=fraction, dim=0), torch.Size([16]))
    low = ablate.state(ACT).clone()
    fraction.set(0.75)
    ablate.control_changed()
    high = ablate.state(ACT)
    assert int((~low).sum()) == 4 and int((~high).sum()) == 12
    assert bool((high <= low).all())


def test_a_ramp_spreads_a_change_along_time_then_ends():
    gain = BendingParameter("gain", 1.0, ramp=1)
    scale = registered(Scale(gain))
    x = torch.ones(2, 4, 100)
    assert torch.equal(scale(x, ACT), x)
    gain.set(3.0)
    out = scale(x, ACT)
    assert torch.equal(out[..., -1], torch.full((2, 4), 3.0))
    assert torch.allclose(out[..., 0], torch.full((2, 4), 1.02))
    assert bool((out.diff(dim=-1) > 0).all())
    assert torch.equal(scale.bend_weight(x, ACT), 3.0 * x)
    gain.advance()
    assert torch.equal(scale(x, ACT), 3.0 * x)


@pytest.mark.parametrize(
    "make",
    [
        lambda v: Bias(v),
        lambda v: Affine(scale=v, bias=v),
        lambda v: Clamp(min=-v, max=v),
        lambda v: Noise(std=v, seed=0),
        lambda v: Threshold(v),
        lambda v: SoftClip(v),
        lambda v: Spread(v),
        lambda v: Randomize(fraction=1.0, std=v, seed=0),
        lambda v: Offset(v, seed=0),
    ],
    ids=lambda make: type(make(0.5)).__name__,
)
def test_continuous_callbacks_ramp_along_time(make):
    knob = BendingParameter("knob", 0.25, ramp=2)
    cb = registered(make(knob))
    x = signed_randn(*SHAPE)
    knob.set(1.25)
    ramped = cb(x, ACT)
    # Two calls: the first goes from 0.25 to 0.75, the second from 0.75 to 1.25.
    middle = registered(make(0.75))(x, ACT)
    torch.testing.assert_close(ramped[..., -1], middle[..., -1], rtol=1e-6, atol=1e-6)
    assert not torch.equal(ramped, middle)
    knob.advance()
    knob.advance()
    settled = registered(make(1.25))
    settled(x, ACT)  # Noise draws anew at each call: compare second calls
    assert torch.equal(bits(cb(x, ACT)), bits(settled(x, ACT)))


def test_a_callback_with_controls_pickles_with_them():
    p = BendingParameter("p", 0.5)
    chain = registered(Scale(2.0 * p) >> Mask(prob=p, seed=0))
    again = pickle.loads(pickle.dumps(chain))
    x = signed_randn(*SHAPE)
    assert torch.equal(again(x, ACT), chain(x, ACT))
    assert len(again.controls()) == 1


def test_a_ramp_on_a_scalar_gives_the_current_value():
    gain = BendingParameter("gain", 1.0, ramp=2)
    scale = registered(Scale(gain), torch.Size([]))
    gain.set(3.0)
    assert torch.equal(scale(torch.tensor(2.0), ACT), torch.tensor(6.0))
