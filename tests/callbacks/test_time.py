"""Tests of torchbend.callbacks.time: Reverse and Unphase."""

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Reverse, Roll, Unphase
from torchbend.controls import BendingParameter
from torchbend.errors import BendingError

# -- Reverse ---------------------------------------------------------------------------------------


def blockwise_flip(x: torch.Tensor, block: int) -> torch.Tensor:
    """Each block of ``block`` samples of the last axis flipped, by hand."""
    return torch.cat([part.flip(-1) for part in x.split(block, -1)], -1)


def test_reverse_flips_each_block_as_written_by_hand():
    x = torch.arange(7.0).expand(2, 7)
    assert Reverse(3)(x, ACT).tolist() == [[2.0, 1.0, 0.0, 5.0, 4.0, 3.0, 6.0]] * 2
    assert Reverse(2)(x, ACT).tolist() == [[1.0, 0.0, 3.0, 2.0, 5.0, 4.0, 6.0]] * 2
    assert Reverse()(x, ACT).tolist() == [[6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]] * 2


@pytest.mark.parametrize("block", [2, 3, 5, 16, 17, 40])
def test_reverse_is_a_flip_of_each_block(block):
    x = signed_randn(2, 4, 37)
    assert torch.equal(bits(Reverse(block)(x, ACT)), bits(blockwise_flip(x, block)))
    assert torch.equal(Reverse(block)(Reverse(block)(x, ACT), ACT), x)


def test_reverse_of_the_whole_axis_is_a_flip():
    x = signed_randn(2, 4, 9)
    assert torch.equal(bits(Reverse()(x, ACT)), bits(x.flip(-1)))
    w = signed_randn(5, 6)
    assert torch.equal(Reverse().bend_weight(w, WEIGHT), w.flip(-1))


def test_reverse_by_blocks_of_1_is_the_identity():
    x = signed_randn(2, 4, 9)
    assert Reverse(1)(x, ACT) is x


def test_reverse_block_control_is_read_at_each_call():
    block = BendingParameter("block", 1)
    cb = Reverse(block)
    x = signed_randn(1, 2, 12)
    assert cb(x, ACT) is x
    block.set(4)
    assert torch.equal(cb(x, ACT), blockwise_flip(x, 4))
    with pytest.raises(BendingError, match=r"0 would make Reverse.block 0.0, but block is"):
        block.set(0)
    assert cb.block == 4


def test_reverse_refuses_bad_blocks_and_targets_without_time():
    with pytest.raises(BendingError, match=r"Reverse: block is a length in samples .* got 0"):
        Reverse(0)
    with pytest.raises(BendingError, match=r"Reverse: block .* got 2.5"):
        Reverse(2.5)
    with pytest.raises(BendingError, match=r"'conv.bias' of shape \[4\]: it reverses time"):
        Reverse(2).register("conv.bias", torch.Size([4]), torch.float32, CPU)
    with pytest.raises(BendingError, match="scalar"):
        Reverse(2)(torch.tensor(1.0), ACT)


# -- Unphase ---------------------------------------------------------------------------------------


def registered(cb: Unphase, shape: list[int], name: str = ACT) -> Unphase:
    cb.register(name, torch.Size(shape), torch.float32, CPU)
    return cb


def test_unphase_rolls_each_channel_by_its_own_amount():
    x = signed_randn(2, 6, 20)
    cb = registered(Unphase(0.5, seed=3), [2, 6, 20])
    shifts = cb.shifts(ACT, 20).flatten().tolist()
    assert len(set(shifts)) > 2  # channels move apart
    assert all(-10 <= s <= 10 for s in shifts)
    out = cb(x, ACT)
    for c, s in enumerate(shifts):
        assert torch.equal(bits(out[:, c]), bits(torch.roll(x[:, c], s, -1)))


def test_unphase_along_another_axis_of_channels():
    x = signed_randn(3, 5, 16)
    cb = registered(Unphase(0.75, seed=1, dim=0), [3, 5, 16])
    shifts = cb.shifts(ACT, 16).flatten().tolist()
    out = cb(x, ACT)
    for c, s in enumerate(shifts):
        assert torch.equal(out[c], torch.roll(x[c], s, -1))


def test_unphase_shifts_scale_with_the_shift_and_the_length():
    cb = registered(Unphase(1.0, seed=0), [1, 64, 8])
    draw = cb.state(ACT).double()
    assert torch.equal(cb.shifts(ACT, 100), torch.floor(draw * 100 + 0.5).long())
    cb.shift = 0.5
    assert torch.equal(cb.shifts(ACT, 100), torch.floor(draw * 50 + 0.5).long())
    assert int(cb.shifts(ACT, 100).abs().max()) <= 50


def test_unphase_same_seed_same_result_other_seed_other_result():
    x = signed_randn(2, 8, 32)
    a = registered(Unphase(0.5, seed=4), [2, 8, 32])(x, ACT)
    b = registered(Unphase(0.5, seed=4), [2, 8, 32])(x, ACT)
    c = registered(Unphase(0.5, seed=5), [2, 8, 32])(x, ACT)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # Each target its own draw from the seed.
    cb = registered(registered(Unphase(0.5, seed=4), [2, 8, 32]), [2, 8, 32], "forward:other")
    assert not torch.equal(cb.shifts(ACT, 32), cb.shifts("forward:other", 32))


def test_unphase_fits_any_length_and_batch():
    cb = registered(Unphase(0.5, seed=2), [1, 4, 8])
    x = signed_randn(3, 4, 50)
    out = cb(x, ACT)
    for c, s in enumerate(cb.shifts(ACT, 50).flatten().tolist()):
        assert torch.equal(out[:, c], torch.roll(x[:, c], s, -1))


def test_unphase_at_shift_0_is_the_identity_and_a_shift_control_moves_it():
    shift = BendingParameter("shift", 0.0)
    cb = registered(Unphase(shift, seed=6), [2, 4, 16])
    x = signed_randn(2, 4, 16)
    assert cb(x, ACT) is x
    shift.set(0.5)
    expected = registered(Unphase(0.5, seed=6), [2, 4, 16])(x, ACT)
    assert torch.equal(cb(x, ACT), expected)


def test_unphase_is_not_roll():
    # Roll moves every channel together; Unphase moves them apart.
    x = signed_randn(1, 8, 16)
    out = registered(Unphase(0.5, seed=0), [1, 8, 16])(x, ACT)
    assert not any(torch.equal(out, Roll(s / 16)(x, ACT)) for s in range(16))


def test_unphase_refuses_bad_arguments_and_targets():
    with pytest.raises(BendingError, match=r"Unphase: shift is a fraction .* got 1.5"):
        Unphase(1.5)
    with pytest.raises(BendingError, match=r"Unphase: dim must be an int"):
        Unphase(dim=(0, 1))
    with pytest.raises(BendingError, match=r"'conv.bias' of shape \[4\]: it shifts channels"):
        Unphase(seed=0).register("conv.bias", torch.Size([4]), torch.float32, CPU)
    with pytest.raises(BendingError, match=r"dim=-1 is its last axis, the time axis"):
        Unphase(dim=-1, seed=0).register(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    cb = registered(Unphase(0.5, seed=0), [2, 4, 8])
    with pytest.raises(BendingError, match=r"holds state of shape \[1, 4, 1\]"):
        cb(signed_randn(2, 5, 8), ACT)
