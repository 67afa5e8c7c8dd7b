"""Tests of torchbend.callbacks.permute."""

import copy
import pickle

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Lambda, Permute
from torchbend.errors import BendingError


def registered(cb: Permute, shape: list[int], name: str = ACT) -> Permute:
    cb.register_target(name, torch.Size(shape), torch.float32, CPU)
    return cb


def test_amount_0_is_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    permute = registered(registered(Permute(amount=0.0), [2, 4, 8]), [4, 3], WEIGHT)
    assert torch.equal(permute.state(ACT), torch.arange(4))
    assert torch.equal(bits(permute(x, ACT)), bits(x))
    assert torch.equal(bits(permute.bend_weight(w, WEIGHT)), bits(w))


def test_permutation_is_a_long_buffer_applied_along_dim():
    permute = registered(Permute(dim=-2, seed=0), [1, 8, 14])
    permutation = permute.state(ACT)
    assert permutation.dtype == torch.long
    assert torch.equal(permutation.sort().values, torch.arange(8))
    assert not torch.equal(permutation, torch.arange(8))
    x = signed_randn(3, 8, 5)
    assert torch.equal(permute(x, ACT), x[:, permutation, :])


def test_amount_shuffles_that_fraction_of_indices():
    permute = registered(Permute(dim=0, seed=0, amount=0.25), [100])
    moved = (permute.state(ACT) != torch.arange(100)).sum().item()
    assert 0 < moved <= 25


def test_seed_makes_the_permutation_reproducible():
    def draw(seed: int, name: str = ACT) -> torch.Tensor:
        return registered(Permute(dim=0, seed=seed), [64], name).state(name)

    assert torch.equal(draw(0), draw(0))
    assert not torch.equal(draw(0), draw(1))
    assert not torch.equal(draw(0), draw(0, "forward:other"))


def test_seed_leaves_the_global_rng_alone_and_none_uses_it():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    registered(Permute(dim=0, seed=3), [64])
    assert torch.equal(torch.get_rng_state(), before)

    torch.manual_seed(0)
    first = registered(Permute(dim=0), [64]).state(ACT)
    torch.manual_seed(0)
    assert torch.equal(registered(Permute(dim=0), [64]).state(ACT), first)


def test_other_batch_and_length_are_fine_but_another_size_along_dim_is_not():
    permute = registered(Permute(dim=-2, seed=0), [1, 4, 14])
    assert permute(torch.ones(4, 4, 32), ACT).shape == (4, 4, 32)
    with pytest.raises(BendingError) as error:
        permute(torch.ones(1, 5, 14), ACT)
    message = str(error.value)
    assert "permutation of 4 indices" in message and "size 5" in message
    assert "[1, 5, 14]" in message and "'forward:conv'" in message


def test_dim_out_of_range_is_refused_at_registration_and_call():
    with pytest.raises(BendingError, match=r"'forward:conv' of shape \[4\]: dim=-2 is out of"):
        registered(Permute(), [4])
    permute = registered(Permute(dim=2), [1, 4, 14])
    with pytest.raises(BendingError, match=r"shape \[4, 14\], which has no axis 2"):
        permute(torch.ones(4, 14), ACT)


@pytest.mark.parametrize("amount", [-0.5, 1.5, float("nan")])
def test_amount_outside_0_1_is_refused(amount: float):
    with pytest.raises(BendingError, match=r"amount .* between 0 and 1, got"):
        Permute(amount=amount)


def test_bad_dim_and_seed_are_refused():
    with pytest.raises(BendingError, match=r"dim must be an int .* got \(0, 1\)"):
        Permute(dim=(0, 1))  # type: ignore[arg-type]
    with pytest.raises(BendingError, match=r"seed must be an int .* got 0.5"):
        Permute(seed=0.5)  # type: ignore[arg-type]


def test_bend_weight_leaves_its_input_alone():
    w = signed_randn(8, 3)
    before = w.clone()
    bent = registered(Permute(seed=0), [8, 3], WEIGHT).bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    cumsum = Lambda(lambda x: x.cumsum(0))
    x = torch.tensor([1.0, 10.0, 100.0])
    permute = registered(Permute(dim=0, seed=0), [3])
    permutation = permute.state(ACT)
    assert torch.equal((permute >> cumsum)(x, ACT), x[permutation].cumsum(0))
    assert torch.equal((cumsum >> permute)(x, ACT), x.cumsum(0)[permutation])


def test_repr_shows_non_default_arguments_only():
    assert repr(Permute()) == "Permute()"
    assert repr(Permute(dim=1, seed=0, amount=0.5)) == "Permute(dim=1, seed=0, amount=0.5)"


def test_copies_keep_the_permutation():
    permute = registered(Permute(), [1, 8, 14])
    x = signed_randn(2, 8, 5)
    for other in (copy.deepcopy(permute), pickle.loads(pickle.dumps(permute))):
        assert torch.equal(other(x, ACT), permute(x, ACT))


def test_torchscript():
    permute = registered(Permute(seed=0), [1, 8, 14])
    scripted = torch.jit.script(permute)
    x = signed_randn(2, 8, 5)
    assert torch.equal(scripted(x, ACT), permute(x, ACT))
