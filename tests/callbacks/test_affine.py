"""Tests of torchbend.callbacks.affine."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Affine, Bias, Scale
from torchbend.errors import BendingError


@pytest.mark.parametrize("cb", [Bias(0.0), Scale(1.0), Affine(1.0, 0.0), Affine()])
def test_neutral_setting_is_the_identity_bit_for_bit(cb):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb.register_target(ACT, x.shape, x.dtype, CPU)
    cb.register_target(WEIGHT, w.shape, w.dtype, CPU)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))
    ints = torch.arange(5)
    assert cb(ints, ACT).dtype == torch.int64


def test_effect():
    x = signed_randn(2, 3)
    assert torch.equal(Bias(0.5)(x, ACT), x + 0.5)
    assert torch.equal(Scale(-2.0)(x, ACT), x * -2.0)
    assert torch.equal(Affine(2.0, 1.0)(x, ACT), x * 2.0 + 1.0)
    assert torch.equal(Affine(scale=3.0)(x, ACT), x * 3.0)
    assert torch.equal(Affine(bias=-1.0)(x, ACT), x - 1.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Bias(float("inf")), "Bias: bias must be a finite number, got inf"),
        (lambda: Scale(float("nan")), "Scale: scale must be a finite number, got nan"),
        (lambda: Affine(scale=float("nan")), "Affine: scale must be a finite number, got nan"),
        (lambda: Affine(bias=float("-inf")), "Affine: bias must be a finite number, got -inf"),
    ],
)
def test_non_finite_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


@pytest.mark.parametrize("cb", [Bias(1.0), Scale(2.0), Affine(2.0, 1.0)])
def test_bend_weight_leaves_its_input_alone(cb):
    w = signed_randn(4, 3)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(2)
    assert torch.equal((Scale(2.0) >> Bias(1.0))(x, ACT), torch.full((2,), 3.0))
    assert torch.equal((Bias(1.0) >> Scale(2.0))(x, ACT), torch.full((2,), 4.0))


def test_repr_shows_non_default_arguments_only():
    assert repr(Bias()) == "Bias()"
    assert repr(Bias(1)) == "Bias(bias=1.0)"
    assert repr(Scale()) == "Scale()"
    assert repr(Scale(2.0)) == "Scale(scale=2.0)"
    assert repr(Affine()) == "Affine()"
    assert repr(Affine(bias=0.5)) == "Affine(bias=0.5)"
    assert repr(Affine(2.0, 0.5)) == "Affine(scale=2.0, bias=0.5)"


@pytest.mark.parametrize("cb", [Bias(0.5), Scale(2.0), Affine(2.0, 1.0), Affine()])
def test_torchscript(cb):
    cb.register_target(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))


def test_torchscript_chain():
    chain = Scale(2.0) >> Bias(1.0)
    scripted = torch.jit.script(chain)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(chain(x, ACT)))
