"""Tests of torchbend.callbacks.noise."""

import copy
import pickle

import pytest
import torch
from callback_helpers import ACT, CPU, WEIGHT, bits, signed_randn

from torchbend.callbacks import Noise, Normal, Scale
from torchbend.errors import BendingError


@pytest.mark.parametrize("op", ["add", "mul"])
def test_std_0_is_the_identity_bit_for_bit(op: str):
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    noise = Noise(std=0.0, op=op)
    noise.register_target(ACT, x.shape, x.dtype, CPU)
    assert torch.equal(bits(noise(x, ACT)), bits(x))
    assert torch.equal(bits(noise.bend_weight(w, WEIGHT)), bits(w))


def test_add_noise_has_the_given_std():
    out = Noise(std=0.5, seed=0)(torch.full((100_000,), 3.0), ACT)
    assert abs(out.mean().item() - 3.0) < 0.01
    assert abs(out.std().item() - 0.5) < 0.01


def test_mul_noise_is_relative_to_the_target():
    noise = Noise(std=0.5, op="mul", seed=0)
    assert torch.equal(noise(torch.zeros(100), ACT), torch.zeros(100))
    out = noise(torch.full((100_000,), 2.0), ACT)
    assert abs(out.mean().item() - 2.0) < 0.02
    assert abs(out.std().item() - 1.0) < 0.02


def test_activations_get_new_noise_at_every_call():
    noise = Noise(std=1.0, seed=0)
    x = torch.zeros(16)
    assert not torch.equal(noise(x, ACT), noise(x, ACT))


def test_seed_makes_a_sequence_of_calls_reproducible():
    def calls(seed: int) -> list[torch.Tensor]:
        noise = Noise(std=1.0, seed=seed)
        return [noise(torch.zeros(16), ACT) for _ in range(3)]

    assert all(torch.equal(a, b) for a, b in zip(calls(0), calls(0)))
    assert not torch.equal(calls(0)[0], calls(1)[0])


def test_seed_leaves_the_global_rng_alone_and_none_uses_it():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    Noise(std=1.0, seed=3)(torch.zeros(16), ACT)
    assert torch.equal(torch.get_rng_state(), before)

    torch.manual_seed(0)
    first = Noise(std=1.0)(torch.zeros(16), ACT)
    torch.manual_seed(0)
    assert torch.equal(Noise(std=1.0)(torch.zeros(16), ACT), first)


def test_weights_get_their_own_noise_once():
    noise = Noise(std=1.0, seed=0)
    w = torch.zeros(4, 3)
    assert torch.equal(noise.bend_weight(w, WEIGHT), noise.bend_weight(w, WEIGHT))
    assert not torch.equal(noise.bend_weight(w, WEIGHT), noise.bend_weight(w, "other.weight"))


def test_dim_draws_one_value_per_channel():
    noise = Noise(std=1.0, dim=-2, seed=0)
    noise.register_target(ACT, torch.Size([1, 4, 14]), torch.float32, CPU)
    out = noise(torch.zeros(3, 4, 32), ACT)
    per_channel = out[0, :, 0]
    assert torch.equal(out, per_channel[None, :, None].expand(3, 4, 32))
    assert per_channel.unique().numel() == 4


def test_dim_out_of_range_is_refused_at_registration_and_call():
    noise = Noise(dim=3)
    with pytest.raises(BendingError, match=r"'forward:conv': dim=3 is out of range .* -3 and 2"):
        noise.register_target(ACT, torch.Size([1, 4, 14]), torch.float32, CPU)
    with pytest.raises(
        BendingError, match=r"dim=3 is out of range for a tensor of shape \[4, 14\]"
    ):
        noise(torch.zeros(4, 14), ACT)


def test_integer_targets_get_floating_noise():
    assert Noise(std=1.0, seed=0)(torch.arange(4), ACT).dtype == torch.float32


@pytest.mark.parametrize("std", [-0.1, float("inf"), float("nan")])
def test_std_must_be_finite_and_non_negative(std: float):
    with pytest.raises(BendingError, match=r"std .* must be a finite number >= 0, got"):
        Noise(std=std)


def test_bad_op_dim_and_seed_are_refused():
    with pytest.raises(BendingError, match="op must be one of 'add', 'mul', got 'plus'"):
        Noise(op="plus")
    with pytest.raises(BendingError, match=r"dim must be an int or a tuple of ints .* got 1.5"):
        Noise(dim=1.5)  # type: ignore[arg-type]
    with pytest.raises(BendingError, match=r"seed must be an int .* got '0'"):
        Noise(seed="0")  # type: ignore[arg-type]


def test_bend_weight_leaves_its_input_alone():
    w = signed_randn(4, 3)
    before = w.clone()
    bent = Noise(std=0.1, seed=0).bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert not torch.equal(bent, w)


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(8)
    assert torch.equal((Noise(std=1.0) >> Scale(0.0))(x, ACT), torch.zeros(8))
    assert not torch.equal((Scale(0.0) >> Noise(std=1.0))(x, ACT), torch.zeros(8))


def test_normal_is_noise():
    assert Normal is Noise


def test_repr_shows_non_default_arguments_only():
    assert repr(Noise()) == "Noise()"
    assert repr(Noise(std=0.5, op="mul")) == "Noise(std=0.5, op='mul')"
    assert repr(Noise(dim=-2, seed=0)) == "Noise(dim=-2, seed=0)"


def test_copies_keep_the_generator_state():
    noise = Noise(std=1.0, seed=0)
    noise(torch.zeros(4), ACT)
    for other in (copy.deepcopy(noise), pickle.loads(pickle.dumps(noise))):
        assert torch.equal(other(torch.zeros(4), ACT), copy.deepcopy(noise)(torch.zeros(4), ACT))


@pytest.mark.parametrize(
    "make",
    [
        lambda: Noise(std=0.5, seed=0),
        lambda: Noise(std=0.5, op="mul", dim=-2, seed=1),
        lambda: Noise(std=0.5, dim=(), seed=2),
        lambda: Noise(std=0.0),
    ],
)
def test_torchscript(make):
    eager, scripted = make(), make()
    for cb in (eager, scripted):
        cb.register_target(ACT, torch.Size([2, 4, 8]), torch.float32, CPU)
    scripted = torch.jit.script(scripted)
    x = signed_randn(2, 4, 8)
    for _ in range(2):
        assert torch.equal(bits(scripted(x, ACT)), bits(eager(x, ACT)))


def test_torchscript_without_seed_uses_the_global_rng():
    noise = Noise(std=0.5)
    scripted = torch.jit.script(Noise(std=0.5))
    x = signed_randn(2, 4, 8)
    torch.manual_seed(0)
    expected = noise(x, ACT)
    torch.manual_seed(0)
    assert torch.equal(scripted(x, ACT), expected)
