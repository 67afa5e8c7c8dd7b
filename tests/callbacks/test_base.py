"""Tests of torchbend.callbacks.base across every callback: arguments, live controls, ramps."""

from __future__ import annotations

import pickle

import pytest
import torch
from callback_helpers import (
    ACT,
    BUILT,
    CONTROLLED,
    CPU,
    NEUTRAL,
    SHAPE,
    bits,
    signed_randn,
)

from torchbend.callbacks import (
    Ablate,
    Affine,
    BendingCallback,
    Bias,
    Chain,
    Clamp,
    Mask,
    Noise,
    Offset,
    Randomize,
    Scale,
    SoftClip,
    Spread,
    Threshold,
)
from torchbend.controls import BendingParameter


def registered(cb: BendingCallback, shape: torch.Size = SHAPE) -> BendingCallback:
    cb.register(ACT, shape, torch.float32, CPU)
    return cb


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


@pytest.mark.parametrize("make", [c[1] for c in NEUTRAL], ids=[c[0] for c in NEUTRAL])
def test_a_control_at_the_neutral_setting_is_the_identity(make):
    cb = registered(make())
    x = signed_randn(*SHAPE)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(x, ACT)), bits(x))


SCRIPTABLE = [make for make in BUILT if make().scriptable]


@pytest.mark.parametrize("make", SCRIPTABLE, ids=lambda make: type(make()).__name__)
def test_every_scriptable_callback_scripts_to_the_same_bending(make):
    eager, scripted = registered(make()), torch.jit.script(registered(make()))
    x = signed_randn(*SHAPE)
    for _ in range(2):  # Noise draws anew at each call
        assert torch.equal(bits(scripted(x, ACT)), bits(eager(x, ACT)))


@pytest.mark.parametrize("make", SCRIPTABLE, ids=lambda make: type(make()).__name__)
def test_every_scriptable_callback_scripts_to_the_same_bending_of_weights(make):
    # What exported modules call when a control moves: each weight's own draw (Noise's from
    # the seed and the weight's name) as in Python.
    from torchbend.export.build import ScriptedWeightCallback

    eager = registered(make())
    scripted = torch.jit.script(ScriptedWeightCallback(registered(make())))
    w = signed_randn(*SHAPE)
    assert torch.equal(bits(scripted.bend_weight(w, ACT)), bits(eager.bend_weight(w, ACT)))


@pytest.mark.parametrize(
    "make",
    [c[1] for c in NEUTRAL if c[1]().scriptable],
    ids=[c[0] for c in NEUTRAL if c[1]().scriptable],
)
def test_every_scriptable_callback_scripts_to_the_identity_at_its_neutral_setting(make):
    scripted = torch.jit.script(registered(make()))
    x = signed_randn(*SHAPE)
    assert torch.equal(bits(scripted(x, ACT)), bits(x))


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
