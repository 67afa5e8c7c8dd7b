"""Tests of torchbend.callbacks.ablation."""

import copy
import pickle

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, ConvNet, bits, signed_randn

import torchbend as tb
from torchbend.callbacks import Ablate, Bias, Bypass, Offset, Randomize, Solo
from torchbend.errors import BendingError


def registered(cb, shape, name=ACT, dtype=torch.float32):
    cb.register(name, torch.Size(shape), dtype, CPU)
    return cb


@pytest.mark.parametrize(
    "make",
    [lambda: Ablate(), lambda: Ablate(channels=[]), lambda: Randomize(), lambda: Offset(),
     lambda: Offset(0.0, seed=1), lambda: Randomize(0.0, std=5.0, seed=1)],
)  # fmt: skip
def test_neutral_setting_is_the_identity_bit_for_bit(make):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb = registered(registered(make(), x.shape), w.shape, WEIGHT)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_ablate_zeroes_the_given_channels():
    ablate = registered(Ablate(channels=[1, -1]), [1, 4, 14])
    x = signed_randn(3, 4, 20)
    out = ablate(x, ACT)
    assert not bool(out[:, [1, 3]].any())
    assert torch.equal(out[:, [0, 2]], x[:, [0, 2]])
    assert torch.equal(
        registered(Ablate(2, dim=0), [3])(torch.ones(3), ACT), torch.tensor([1.0, 1, 0])
    )


def test_solo_keeps_only_the_given_channels_and_bypass_is_ablate():
    x = signed_randn(3, 4, 20)
    out = registered(Solo(channels=[1, -1]), [1, 4, 14])(x, ACT)
    assert not bool(out[:, [0, 2]].any())
    assert torch.equal(bits(out[:, [1, 3]]), bits(x[:, [1, 3]]))
    assert torch.equal(
        registered(Solo(0, dim=0), [3])(torch.ones(3), ACT), torch.tensor([1.0, 0, 0])
    )
    assert torch.equal(bits(registered(Solo(1, active=False), [1, 4, 2])(x, ACT)), bits(x))
    assert Bypass is Ablate and repr(Solo([1], dim=1)) == "Solo(channels=[1], dim=1)"
    scripted = torch.jit.script(registered(Solo(2), [1, 4, 20]))
    assert torch.equal(scripted(x, ACT), registered(Solo(2), [1, 4, 20])(x, ACT))


def test_ablate_zeroes_a_random_fraction_of_channels_reproducibly():
    def zeroed(seed, name=ACT):
        out = registered(Ablate(fraction=0.25, seed=seed), [1, 64, 3], name)(
            torch.ones(1, 64, 3), name
        )
        return (out[0, :, 0] == 0).nonzero().flatten()

    assert len(zeroed(0)) == 16
    assert torch.equal(zeroed(0), zeroed(0))
    assert not torch.equal(zeroed(0), zeroed(1))
    assert not torch.equal(zeroed(0), zeroed(0, "forward:other"))
    both = registered(Ablate(channels=[0, 1], fraction=1.0), [2, 4, 3])
    assert not bool(both(torch.ones(2, 4, 3), ACT).any())


def test_randomize_replaces_a_fraction_of_elements_once_per_target():
    randomize = registered(Randomize(fraction=0.3, std=2.0, seed=0), [100, 100])
    x = torch.full((100, 100), 1000.0)
    out = randomize(x, ACT)
    replaced = out != 1000.0
    assert abs(replaced.float().mean().item() - 0.3) < 0.02
    assert abs(out[replaced].std().item() - 2.0) < 0.1
    assert torch.equal(randomize(x, ACT), out)
    assert torch.equal(
        registered(Randomize(fraction=0.3, std=2.0, seed=0), [100, 100])(x, ACT), out
    )


def test_randomize_draws_for_the_traced_shape():
    randomize = registered(Randomize(fraction=0.5), [1, 4, 14])
    with pytest.raises(BendingError, match=r"\[1, 4, 14\].*\[1, 4, 20\]"):
        randomize(torch.ones(1, 4, 20), ACT)


def test_offset_adds_one_random_constant_per_channel():
    offset = registered(Offset(0.5, seed=0), [1, 8, 14])
    x = signed_randn(3, 8, 20)
    shift = offset(x, ACT) - x
    per_channel = shift[0, :, 0]
    torch.testing.assert_close(shift, per_channel[None, :, None].expand(3, 8, 20))
    assert bool((per_channel.abs() <= 0.5).all()) and per_channel.unique().numel() == 8
    assert torch.equal(offset.bend_weight(torch.zeros(1, 8, 1), ACT)[0, :, 0], per_channel)


def test_seed_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    registered(Ablate(fraction=0.5, seed=3), [1, 4, 8])
    registered(Randomize(fraction=0.5, seed=3), [1, 4, 8])
    registered(Offset(0.5, seed=3), [1, 4, 8])
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Ablate(channels="a"), r"Ablate: channels must be an int or a sequence .* 'a'"),
        (lambda: Ablate(channels=[0.5]), r"Ablate: channels must be .* got \[0.5\]"),
        (lambda: Ablate(fraction=2.0), r"Ablate: fraction is .* between 0 and 1, got 2.0"),
        (lambda: Ablate(seed=0.5), r"Ablate: seed must be an int .* got 0.5"),
        (lambda: Randomize(fraction=-0.1), r"Randomize: fraction .* between 0 and 1, got -0.1"),
        (lambda: Randomize(std=-1.0), r"Randomize: std is a standard deviation .* >= 0, got -1"),
        (lambda: Offset(-1.0), r"Offset: offset is an amplitude .* >= 0, got -1.0"),
        (lambda: Offset(dim=None), r"Offset: dim must be an int .* got None"),
        (lambda: Solo([]), r"Solo: give at least one channel to keep, got \[\]"),
        (lambda: Solo("a"), r"Solo: channels must be an int or a sequence .* 'a'"),
        (lambda: Solo(0, active=0.5), r"Solo: active must be True or False, got 0.5"),
    ],
)
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


def test_bad_channels_and_axes_are_refused_at_registration():
    with pytest.raises(
        BendingError, match=r"channels \[4, -5\] are out of range for its 4 channels"
    ):
        registered(Ablate(channels=[0, 4, -5]), [1, 4, 8])
    with pytest.raises(
        BendingError,
        match=r"channels \[3\] are out of range for its 3 channels along dim=1; "
        r"give indices from 0 to 2",
    ):
        registered(Solo(3, dim=1), [1, 3, 8])
    with pytest.raises(BendingError, match=r"of shape \[4\]: dim=-2 is out of range"):
        registered(Offset(0.5), [4])


@pytest.mark.parametrize(
    "make",
    [lambda: Ablate([0], 0.5, seed=0), lambda: Randomize(0.5, seed=0), lambda: Offset(1.0, seed=0)],
)
def test_bend_weight_leaves_its_input_alone(make):
    w = signed_randn(4, 3)
    cb = registered(make(), w.shape, WEIGHT)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(1, 2, 3)
    ablate_then_bias = registered(Ablate(channels=0) >> Bias(1.0), [1, 2, 3])
    bias_then_ablate = registered(Bias(1.0) >> Ablate(channels=0), [1, 2, 3])
    assert torch.equal(ablate_then_bias(x, ACT)[0, :, 0], torch.tensor([1.0, 2.0]))
    assert torch.equal(bias_then_ablate(x, ACT)[0, :, 0], torch.tensor([0.0, 2.0]))


def test_repr_shows_non_default_arguments_only():
    assert repr(Ablate()) == "Ablate()"
    assert (
        repr(Ablate([1, 2], 0.5, dim=1, seed=0))
        == "Ablate(channels=[1, 2], fraction=0.5, dim=1, seed=0)"
    )
    assert repr(Randomize(0.5, seed=1)) == "Randomize(fraction=0.5, seed=1)"
    assert repr(Offset(0.5, dim=-1)) == "Offset(offset=0.5, dim=-1)"


@pytest.mark.parametrize(
    "make",
    [lambda: Ablate([0], 0.5, seed=0), lambda: Randomize(0.5, seed=0), lambda: Offset(1.0, seed=0)],
)
def test_copies_keep_the_state(make):
    cb = registered(make(), [1, 4, 8])
    x = signed_randn(1, 4, 8)
    for other in (copy.deepcopy(cb), pickle.loads(pickle.dumps(cb))):
        assert torch.equal(other(x, ACT), cb(x, ACT))


@pytest.mark.parametrize(
    "make",
    [lambda: Ablate([0], 0.5, seed=0), lambda: Ablate(), lambda: Randomize(0.5, std=2.0, seed=0),
     lambda: Randomize(), lambda: Offset(1.0, seed=0), lambda: Offset()],
)  # fmt: skip
def test_torchscript(make):
    cb = registered(make(), [2, 4, 8])
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))


def test_solo_exports_with_a_live_switch_and_saves_in_configs(tmp_path):
    torch.manual_seed(0)
    bended = tb.BendedModule(ConvNet())
    x = torch.randn(1, 1, 32)
    bended.trace(x=x)
    bended.bend(Solo([1, 2], active=tb.BendingParameter("solo", True)), "conv$")
    scripted = tb.export.torchscript(bended)
    assert torch.allclose(scripted(x), bended(x), atol=1e-6)
    soloed = bended(x)
    assert scripted.set_solo(False) == 0
    bended.update("solo", False)
    assert torch.allclose(scripted(x), bended(x), atol=1e-6)
    assert not torch.allclose(bended(x), soloed)
    path = tmp_path / "solo.json"
    bended.bending_config().save(path)
    again = tb.BendedModule(ConvNet())
    again.module.load_state_dict(bended.module.state_dict())
    again.trace(x=x)
    again.bend(tb.BendingConfig.load(path))
    again.update("solo", True)
    assert torch.equal(again(x), soloed)
