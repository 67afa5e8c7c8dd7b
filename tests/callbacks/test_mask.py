"""Tests of torchbend.callbacks.mask."""

import copy
import pickle

import pytest
import torch
from callback_helpers import ACT, WEIGHT, bits, registered, signed_randn

from torchbend.callbacks import Bias, Mask
from torchbend.errors import BendingError


def test_prob_0_is_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    mask = registered(registered(Mask(prob=0.0), [2, 4, 8]), [4, 3], WEIGHT)
    assert torch.equal(bits(mask(x, ACT)), bits(x))
    assert torch.equal(bits(mask.bend_weight(w, WEIGHT)), bits(w))


def test_prob_1_zeroes_everything():
    x = signed_randn(2, 4, 8)
    assert torch.equal(registered(Mask(prob=1.0), [2, 4, 8])(x, ACT), torch.zeros(2, 4, 8))


def test_fraction_of_zeros_is_near_prob():
    x = torch.ones(1000, 100)
    out = registered(Mask(prob=0.3, seed=0), [1000, 100])(x, ACT)
    assert set(out.unique().tolist()) == {0.0, 1.0}
    assert abs((out == 0).float().mean().item() - 0.3) < 0.01


def test_mask_is_drawn_once_and_kept():
    mask = registered(Mask(prob=0.5), [64])
    x = torch.ones(64)
    assert torch.equal(mask(x, ACT), mask(x, ACT))


def test_seed_makes_the_mask_reproducible():
    def draw(seed: int, name: str = ACT) -> torch.Tensor:
        return registered(Mask(prob=0.5, seed=seed), [256], name).state(name)

    assert torch.equal(draw(0), draw(0))
    assert not torch.equal(draw(0), draw(1))
    assert not torch.equal(draw(0), draw(0, "forward:other"))


def test_seed_leaves_the_global_rng_alone_and_none_uses_it():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    registered(Mask(prob=0.5, seed=3), [256])
    assert torch.equal(torch.get_rng_state(), before)

    torch.manual_seed(0)
    first = registered(Mask(prob=0.5), [256]).state(ACT)
    torch.manual_seed(0)
    assert torch.equal(registered(Mask(prob=0.5), [256]).state(ACT), first)


def test_mask_is_kept_in_the_target_dtype():
    mask = registered(Mask(prob=0.5, seed=0), [8], dtype=torch.float64)
    assert mask.state(ACT).dtype == torch.float64


def test_dim_masks_whole_channels_and_broadcasts_over_batch_and_length():
    mask = registered(Mask(prob=0.5, dim=-2, seed=0), [1, 4, 14])
    assert list(mask.state(ACT).shape) == [1, 4, 1]
    out = mask(torch.ones(4, 4, 32), ACT)
    per_channel = out[0, :, 0]
    assert torch.equal(out, per_channel[None, :, None].expand(4, 4, 32))


def test_dim_tuple_keeps_the_size_of_each_axis():
    mask = registered(Mask(prob=0.5, dim=(0, -1), seed=0), [3, 4, 5])
    assert list(mask.state(ACT).shape) == [3, 1, 5]


def test_full_shape_mask_on_another_shape_names_both_shapes_and_the_fix():
    mask = registered(Mask(prob=0.3), [1, 4, 14])
    with pytest.raises(BendingError) as error:
        mask(torch.ones(4, 1, 32), ACT)
    message = str(error.value)
    assert "[1, 4, 14]" in message and "[4, 1, 32]" in message and "dim=" in message


def test_mask_with_dim_works_on_another_batch_and_length():
    mask = registered(Mask(prob=0.3, dim=-2), [1, 4, 14])
    assert mask(torch.ones(4, 4, 32), ACT).shape == (4, 4, 32)


@pytest.mark.parametrize("prob", [-0.1, 1.5, float("nan")])
def test_prob_outside_0_1_is_refused(prob: float):
    with pytest.raises(BendingError, match=r"prob .* between 0 and 1, got"):
        Mask(prob=prob)


def test_bad_dim_and_seed_are_refused():
    with pytest.raises(BendingError, match=r"dim must be an int or a tuple of ints .* got 'a'"):
        Mask(dim="a")  # type: ignore[arg-type]
    with pytest.raises(BendingError, match=r"seed must be an int .* got 1.5"):
        Mask(seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(BendingError, match=r"'forward:conv': dim=3 is out of range .* -3 and 2"):
        registered(Mask(dim=3), [1, 4, 14])


def test_bend_weight_leaves_its_input_alone():
    w = signed_randn(4, 3)
    before = w.clone()
    bent = registered(Mask(prob=0.5, seed=0), [4, 3], WEIGHT).bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(3)
    mask_then_bias = registered(Mask(prob=1.0) >> Bias(1.0), [3])
    bias_then_mask = registered(Bias(1.0) >> Mask(prob=1.0), [3])
    assert torch.equal(mask_then_bias(x, ACT), torch.ones(3))
    assert torch.equal(bias_then_mask(x, ACT), torch.zeros(3))


def test_repr_shows_non_default_arguments_only():
    assert repr(Mask()) == "Mask()"
    assert repr(Mask(prob=0.5, dim=-2)) == "Mask(prob=0.5, dim=-2)"
    assert repr(Mask(dim=(0, 1), seed=3)) == "Mask(dim=(0, 1), seed=3)"


def test_copies_keep_the_mask():
    mask = registered(Mask(prob=0.5, dim=-2), [1, 4, 14])
    x = signed_randn(2, 4, 5)
    for other in (copy.deepcopy(mask), pickle.loads(pickle.dumps(mask))):
        assert torch.equal(other(x, ACT), mask(x, ACT))


def test_torchscript():
    mask = registered(Mask(prob=0.5, dim=-2, seed=0), [1, 4, 14])
    scripted = torch.jit.script(mask)
    x = signed_randn(2, 4, 9)
    assert torch.equal(scripted(x, ACT), mask(x, ACT))
