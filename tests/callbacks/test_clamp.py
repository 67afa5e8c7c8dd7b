"""Tests of torchbend.callbacks.clamp."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Clamp, Scale
from torchbend.errors import BendingError


def test_no_bound_is_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    clamp = Clamp()
    assert torch.equal(bits(clamp(x, ACT)), bits(x))
    assert torch.equal(bits(clamp.bend_weight(w, WEIGHT)), bits(w))


def test_effect():
    x = signed_randn(64)
    assert torch.equal(Clamp(-0.5, 0.5)(x, ACT), x.clamp(-0.5, 0.5))
    assert torch.equal(Clamp(min=0.0)(x, ACT), x.clamp(min=0.0))
    assert torch.equal(Clamp(max=0.0)(x, ACT), x.clamp(max=0.0))
    assert torch.equal(Clamp(1.0, 1.0)(x, ACT), torch.ones(64))


def test_bad_bounds_are_refused():
    with pytest.raises(BendingError, match=r"min=1.0 is greater than max=-1.0; give min <= max"):
        Clamp(min=1.0, max=-1.0)
    with pytest.raises(BendingError, match=r"max must be a number or None .* got nan"):
        Clamp(max=float("nan"))


def test_bend_weight_leaves_its_input_alone():
    w = signed_randn(4, 3)
    before = w.clone()
    bent = Clamp(-0.1, 0.1).bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(2)
    assert torch.equal((Scale(10.0) >> Clamp(max=2.0))(x, ACT), torch.full((2,), 2.0))
    assert torch.equal((Clamp(max=2.0) >> Scale(10.0))(x, ACT), torch.full((2,), 10.0))


def test_repr_shows_non_default_arguments_only():
    assert repr(Clamp()) == "Clamp()"
    assert repr(Clamp(max=1)) == "Clamp(max=1.0)"
    assert repr(Clamp(-1.0, 1.0)) == "Clamp(min=-1.0, max=1.0)"


@pytest.mark.parametrize("cb", [Clamp(), Clamp(min=0.0), Clamp(max=0.0), Clamp(-0.5, 0.5)])
def test_torchscript(cb):
    cb.register_target(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))
