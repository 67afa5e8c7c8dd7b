"""Tests of torchbend.callbacks.morphology."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Dilate, Erode, Scale
from torchbend.errors import BendingError


def reference(x: torch.Tensor, size: int, reduce) -> torch.Tensor:
    """A window of ``size`` samples around each sample, cut at the ends."""
    before = (size - 1) // 2
    after = size - 1 - before
    length = x.shape[-1]
    columns = [
        reduce(x[..., max(t - before, 0) : min(t + after + 1, length)], -1) for t in range(length)
    ]
    return torch.stack(columns, -1)


@pytest.mark.parametrize("cb", [Erode(), Dilate(), Erode(1), Dilate(1)])
def test_size_1_is_the_identity_bit_for_bit(cb):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb.register(ACT, x.shape, x.dtype, CPU)
    cb.register(WEIGHT, w.shape, w.dtype, CPU)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


@pytest.mark.parametrize("size", [2, 3, 4, 7, 40])
def test_min_and_max_filters_along_time(size):
    x = signed_randn(2, 3, 20)
    assert torch.equal(Erode(size)(x, ACT), reference(x, size, torch.amin))
    assert torch.equal(Dilate(size)(x, ACT), reference(x, size, torch.amax))


def test_integers_and_any_rank():
    x = torch.tensor([0, 5, 0, 0, 1])
    assert torch.equal(Dilate(3)(x, ACT), torch.tensor([5, 5, 5, 1, 1]))
    assert torch.equal(Erode(3)(x, ACT), torch.tensor([0, 0, 0, 0, 0]))


def test_dilate_then_erode_closes_gaps():
    x = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])
    assert torch.equal((Dilate(3) >> Erode(3))(x, ACT), torch.ones(5))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Erode(0), r"Erode: size is a window in samples and must be an int >= 1, got 0"),
        (lambda: Dilate(2.5), r"Dilate: size .* an int >= 1, got 2.5"),
        (lambda: Dilate(True), r"Dilate: size .* got True"),
    ],
)
def test_bad_sizes_are_refused(make, message):
    with pytest.raises(BendingError, match=message):
        make()


def test_scalars_are_refused():
    with pytest.raises(BendingError, match="scalar, with no time axis"):
        Erode(3).register(ACT, torch.Size([]), torch.float32, CPU)


@pytest.mark.parametrize("cb", [Erode(2), Dilate(2)])
def test_bend_weight_leaves_its_input_alone(cb):
    w = signed_randn(4, 3)
    before = w.clone()
    bent = cb.bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.tensor([0.0, 1.0, 0.0])
    assert torch.equal((Dilate(3) >> Scale(2.0))(x, ACT), torch.full((3,), 2.0))
    assert torch.equal((Scale(-1.0) >> Dilate(3))(x, ACT), torch.zeros(3))


def test_repr_shows_non_default_arguments_only():
    assert repr(Erode()) == "Erode()"
    assert repr(Dilate(3)) == "Dilate(size=3)"


@pytest.mark.parametrize("cb", [Erode(3), Dilate(4), Erode()])
def test_torchscript(cb):
    cb.register(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(cb)
    x = signed_randn(2, 4, 8)
    assert torch.equal(bits(scripted(x, ACT)), bits(cb(x, ACT)))
