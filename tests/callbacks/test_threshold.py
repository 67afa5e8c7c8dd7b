"""Tests of torchbend.callbacks.threshold."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Scale, Threshold, ThresholdActivation
from torchbend.errors import BendingError


@pytest.mark.parametrize(
    "cb", [Threshold(), Threshold(0), ThresholdActivation(), ThresholdActivation(0.99)]
)
def test_neutral_setting_is_the_identity_bit_for_bit(cb):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb.register(ACT, x.shape, x.dtype, CPU)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_threshold_zeroes_small_magnitudes_only():
    x = signed_randn(4, 64)
    out = Threshold(0.5)(x, ACT)
    small = x.abs() < 0.5
    assert bool((out[small] == 0).all())
    assert torch.equal(out[~small], x[~small])
    assert torch.equal(Threshold(0.5)(torch.arange(-2, 3), ACT), torch.tensor([-2, -1, 0, 1, 2]))


def test_threshold_activation_keeps_the_strongest_channels():
    x = signed_randn(3, 8, 32)
    x[:, 2] *= 10.0
    x[:, 5] *= 5.0
    out = ThresholdActivation(keep=0.25)(x, ACT)  # 2 of 8 channels
    assert torch.equal(out[:, [2, 5]], x[:, [2, 5]])
    assert not bool(out[:, [0, 1, 3, 4, 6, 7]].any())
    assert not bool(ThresholdActivation(keep=0.0)(x, ACT).any())


def test_threshold_activation_ranks_by_mean_magnitude_over_other_axes():
    w = torch.tensor([[1.0, -4.0], [2.0, 2.0], [-3.0, 0.0]])  # means of |w| by column: 2, 2
    out = ThresholdActivation(keep=0.5, dim=0)(w, WEIGHT)  # by row: 2.5, 2, 1.5 -> keep 2
    assert torch.equal(out, torch.tensor([[1.0, -4.0], [2.0, 2.0], [0.0, 0.0]]))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Threshold(-0.1), r"Threshold: value is a magnitude .* >= 0, got -0.1"),
        (lambda: Threshold("a"), r"Threshold: value .* got 'a'"),
        (lambda: ThresholdActivation(1.5), r"keep is the fraction .* between 0 and 1, got 1.5"),
        (lambda: ThresholdActivation(dim=(0, 1)), r"dim must be an int .* got \(0, 1\)"),
    ],
)
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


def test_bad_axis_is_refused_at_registration_and_call():
    with pytest.raises(BendingError, match=r"'forward:conv' of shape \[4\]: dim=-2 is out of"):
        ThresholdActivation(0.5).register(ACT, torch.Size([4]), torch.float32, CPU)
    with pytest.raises(BendingError, match=r"shape \[4\], which has no axis -2"):
        ThresholdActivation(0.5)(torch.ones(4), ACT)


@pytest.mark.parametrize("cb", [Threshold(0.5), ThresholdActivation(0.5)])
def test_bend_weight_leaves_its_input_alone(cb):
    w = signed_randn(4, 3)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.tensor([0.3, 0.6])
    assert torch.equal((Threshold(0.5) >> Scale(2.0))(x, ACT), torch.tensor([0.0, 1.2]))
    assert torch.equal((Scale(2.0) >> Threshold(0.5))(x, ACT), torch.tensor([0.6, 1.2]))


def test_repr_shows_non_default_arguments_only():
    assert repr(Threshold()) == "Threshold()"
    assert repr(Threshold(1)) == "Threshold(value=1.0)"
    assert repr(ThresholdActivation(0.5, dim=1)) == "ThresholdActivation(keep=0.5, dim=1)"


@pytest.mark.parametrize(
    "cb", [Threshold(0.5), Threshold(), ThresholdActivation(0.5), ThresholdActivation()]
)
def test_torchscript(cb):
    cb.register(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))
