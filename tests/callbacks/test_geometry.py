"""Tests of torchbend.callbacks.geometry."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Flip, Roll, Scale, TimeStretch
from torchbend.errors import BendingError


@pytest.mark.parametrize(
    "cb", [Roll(), Roll(1.0), Roll(-1.0), Flip(active=False), TimeStretch(), TimeStretch(1)]
)
def test_neutral_setting_is_the_identity_bit_for_bit(cb):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb.register(ACT, x.shape, x.dtype, CPU)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    assert cb(x, ACT) is x or torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_roll_shifts_by_a_rounded_fraction_of_the_size():
    x = signed_randn(2, 4, 10)
    assert torch.equal(Roll(0.25)(x, ACT), torch.roll(x, 3, -1))  # 2.5 elements: halves round up
    assert torch.equal(Roll(-0.5)(x, ACT), torch.roll(x, -5, -1))
    assert torch.equal(Roll(0.5, dim=1)(x, ACT), torch.roll(x, 2, 1))
    assert Roll(0.01)(x, ACT) is x  # less than half an element: no roll at all


def test_flip_reverses_the_axes():
    x = signed_randn(2, 4, 8)
    assert torch.equal(Flip()(x, ACT), x.flip(-1))
    assert torch.equal(Flip(dim=(0, -2))(x, ACT), x.flip(0, 1))


def test_time_stretch_reads_at_t_times_factor_and_holds_the_edge():
    x = signed_randn(3, 16)
    half = TimeStretch(0.5)(x, ACT)
    assert torch.equal(half[:, ::2], x[:, :8])
    torch.testing.assert_close(half[:, 1::2], (x[:, :8] + x[:, 1:9]) / 2)
    double = TimeStretch(2.0)(x, ACT)
    assert torch.equal(double[:, :8], x[:, ::2])
    assert torch.equal(double[:, 8:], x[:, -1:].expand(3, 8))
    assert torch.equal(TimeStretch(0.0)(x, ACT), x[:, :1].expand(3, 16))


def test_time_stretch_of_integers_is_floating():
    assert TimeStretch(0.5)(torch.arange(4), ACT).dtype == torch.float32


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Roll(1.5), r"Roll: shift is a fraction .* between -1 and 1, got 1.5"),
        (lambda: Roll(dim=0.5), r"Roll: dim must be an int .* got 0.5"),
        (lambda: Flip(dim=()), r"Flip: dim must name at least one axis, got \(\)"),
        (lambda: Flip(dim="a"), r"Flip: dim must be an int or a tuple of ints .* got 'a'"),
        (lambda: Flip(active=2), r"Flip: active must be True or False, got 2"),
        (lambda: TimeStretch(-1.0), r"TimeStretch: factor is a speed .* >= 0, got -1.0"),
        (lambda: TimeStretch(float("inf")), r"TimeStretch: factor .* got inf"),
    ],
)
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


def test_bad_axes_are_refused_at_registration_and_call():
    with pytest.raises(BendingError, match=r"'forward:conv' of shape \[4\]: dim=-2 is out of"):
        Roll(0.5, dim=-2).register(ACT, torch.Size([4]), torch.float32, CPU)
    with pytest.raises(BendingError, match=r"'forward:conv': dim=2 is out of range"):
        Flip(dim=2).register(ACT, torch.Size([4, 3]), torch.float32, CPU)
    with pytest.raises(BendingError, match=r"shape \[4\], which has no axis -2"):
        Flip(dim=-2)(torch.ones(4), ACT)
    with pytest.raises(BendingError, match="scalar, with no time axis"):
        TimeStretch(2.0).register(ACT, torch.Size([]), torch.float32, CPU)


@pytest.mark.parametrize("cb", [Roll(0.25), Flip(), TimeStretch(0.5)])
def test_bend_weight_leaves_its_input_alone(cb):
    w = signed_randn(4, 3)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert torch.equal((Flip() >> Roll(0.25))(x, ACT), torch.tensor([1.0, 4.0, 3.0, 2.0]))
    assert torch.equal((Scale(2.0) >> Flip())(x, ACT), torch.tensor([8.0, 6.0, 4.0, 2.0]))


def test_repr_shows_non_default_arguments_only():
    assert repr(Roll()) == "Roll()"
    assert repr(Roll(0.5, dim=0)) == "Roll(shift=0.5, dim=0)"
    assert repr(Flip(dim=(0, 1), active=False)) == "Flip(dim=(0, 1), active=False)"
    assert repr(TimeStretch(2)) == "TimeStretch(factor=2.0)"


@pytest.mark.parametrize(
    "cb", [Roll(0.3), Roll(), Flip(), Flip(dim=(0, -1), active=False), TimeStretch(1.7)]
)
def test_torchscript(cb):
    cb.register(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))
