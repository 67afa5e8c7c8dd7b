"""Tests of torchbend.callbacks.lambda_."""

import functools

import pytest
import torch
from callback_helpers import ACT, WEIGHT, bits, signed_randn

from torchbend.callbacks import Lambda, Scale
from torchbend.errors import BendingError


def test_identity_function_is_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 8)
    w = signed_randn(4, 3)
    cb = Lambda(lambda x: x)
    assert torch.equal(bits(cb(x, ACT)), bits(x))
    assert torch.equal(bits(cb.bend_weight(w, WEIGHT)), bits(w))


def test_fn_gets_the_name_only_if_it_takes_two_positional_parameters():
    seen: list[str] = []

    def with_name(x: torch.Tensor, name: str) -> torch.Tensor:
        seen.append(name)
        return x * 2

    x = torch.ones(2)
    assert torch.equal(Lambda(with_name)(x, ACT), torch.full((2,), 2.0))
    assert seen == [ACT]
    assert torch.equal(Lambda(lambda x, scale=3.0: x * scale)(x, ACT), torch.full((2,), 3.0))
    assert torch.equal(Lambda(torch.tanh)(x, ACT), torch.tanh(x))
    clamp = functools.partial(torch.clamp, min=0.0, max=0.5)
    assert torch.equal(Lambda(clamp)(x, ACT), torch.full((2,), 0.5))


def test_bad_fn_is_refused():
    with pytest.raises(BendingError, match=r"fn must be a callable .* got float: 2.0"):
        Lambda(2.0)  # type: ignore[arg-type]
    with pytest.raises(BendingError, match=r"<lambda>\(x, name, other\) requires 3"):
        Lambda(lambda x, name, other: x)
    with pytest.raises(BendingError, match=r"must return a tensor, but returned list on 'x'"):
        Lambda(lambda x: [x])(torch.ones(1), "x")


def test_bend_weight_leaves_its_input_alone():
    w = signed_randn(4, 3)
    before = w.clone()
    bent = Lambda(torch.sin).bend_weight(w, WEIGHT)
    assert torch.equal(bits(w), bits(before))
    assert torch.equal(bent, torch.sin(before))


def test_chaining_applies_callbacks_in_order():
    x = torch.ones(2)
    add_one = Lambda(lambda x: x + 1)
    assert torch.equal((add_one >> Scale(2.0))(x, ACT), torch.full((2,), 4.0))
    assert torch.equal((Scale(2.0) >> add_one)(x, ACT), torch.full((2,), 3.0))


def test_repr_names_the_function():
    assert repr(Lambda(torch.tanh)) == "Lambda(fn=tanh)"
    assert repr(Lambda(lambda x: x)) == "Lambda(fn=<lambda>)"


def test_is_marked_not_scriptable():
    assert Lambda.scriptable is False
    assert (Scale(2.0) >> Lambda(torch.tanh)).scriptable is False
    with pytest.raises(Exception):  # noqa: B017 - TorchScript's error type varies by version
        torch.jit.script(Lambda(torch.tanh))
