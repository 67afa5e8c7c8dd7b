"""Tests of torchbend.callbacks.steer: units, identity, ramps, shapes, scripting, export and
configurations (the vector as numbers, or in a side file)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from callback_helpers import ACT, bits, registered, signed_randn
from torch import nn

import torchbend as tb
from torchbend.callbacks import Steer
from torchbend.config.tensors import INLINE_MAX
from torchbend.errors import BendingError


def rms(x: torch.Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


@pytest.mark.parametrize(
    ("vector", "dim", "shape"),
    [((4,), -2, [2, 4, 16]), ((3, 5), 1, [2, 3, 5, 7]), ((3, 5), -3, [1, 3, 5, 2])],
)
@pytest.mark.parametrize("strength", [1.0, -0.5, 2.0])
def test_strength_counts_in_the_rms_given(vector, dim, shape, strength):
    v = signed_randn(*vector)
    steer = registered(Steer(v, strength=strength, dim=dim, rms=0.25), shape)
    x = signed_randn(*shape)
    offset = steer(x, ACT) - x
    assert rms(offset) == pytest.approx(abs(strength) * 0.25, rel=1e-5)
    # Along the vector: the same offset at every batch item and time step.
    axes = [
        d
        for d in range(len(shape))
        if d not in range(dim % len(shape), dim % len(shape) + len(vector))
    ]
    direction = offset.mean(axes)
    torch.testing.assert_close(direction, v * (strength * 0.25 / rms(v)), rtol=1e-5, atol=1e-6)


def test_without_rms_strength_one_adds_the_vector():
    v = torch.tensor([1.0, -2.0, 0.5])
    out = Steer(v)(torch.zeros(2, 3, 4), ACT)
    torch.testing.assert_close(out, v[None, :, None].expand(2, 3, 4))


def test_strength_zero_is_the_identity_bit_for_bit():
    x = signed_randn(2, 4, 16)
    steer = Steer(signed_randn(4), strength=0.0)
    assert torch.equal(bits(steer(x, ACT)), bits(x))
    assert torch.equal(bits(steer.bend_weight(x, ACT)), bits(x))
    assert torch.equal(bits(torch.jit.script(steer)(x, ACT)), bits(x))


def test_a_ramp_spreads_the_strength_along_time_in_python_and_scripted():
    knob = tb.BendingParameter("knob", 0.0, ramp=1)
    steer = registered(Steer(torch.tensor([1.0, -1.0]), strength=knob, rms=1.0), [1, 2, 8])
    scripted = torch.jit.script(
        registered(Steer(torch.tensor([1.0, -1.0]), 0.0, rms=1.0), [1, 2, 8])
    )
    knob.set(1.0)
    scripted.set_call_range("strength", 0.0, 1.0, 1.0)
    x = torch.zeros(1, 2, 8)
    out = steer(x, ACT)
    assert torch.equal(scripted(x, ACT), out)
    torch.testing.assert_close(out[0, 0], torch.arange(1, 9) / 8.0)
    assert torch.equal(out[0, 1], -out[0, 0])
    knob.advance()
    assert torch.equal(steer(x, ACT)[0, 0], torch.ones(8))


def test_a_vector_of_other_channels_is_refused_naming_both_shapes():
    steer = Steer(torch.ones(3))
    with pytest.raises(
        BendingError, match=r"'forward:conv' of shape \[2, 4, 16\]: its vector has shape \[3\]"
    ):
        registered(steer, [2, 4, 16])
    with pytest.raises(torch.jit.Error, match=r"of shape \[2, 4, 16\]: its vector has shape \[3\]"):
        torch.jit.script(Steer(torch.ones(3)))(torch.zeros(2, 4, 16), ACT)
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 4, 1)))
    bended.trace(input=torch.zeros(1, 1, 8))
    with pytest.raises(BendingError, match=r"of shape \[1, 4, 8\]: its vector has shape \[3\]"):
        bended.bend(Steer(torch.ones(3)), "_0$")
    assert bended.bendings == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (dict(vector=torch.zeros(3)), "vector is zero everywhere"),
        (dict(vector=torch.tensor([1.0, float("nan")])), "vector must hold finite numbers"),
        (dict(vector=torch.tensor(1.0)), "at least one axis"),
        (dict(vector=torch.ones(2, dtype=torch.int64)), "a tensor of floats"),
        (dict(vector="ab"), "a tensor \\(or a list\\) of numbers"),
        (dict(vector=torch.ones(2), rms=0.0), "rms must be a finite number > 0"),
        (dict(vector=torch.ones(2), rms=float("inf")), "rms must be a finite number > 0"),
        (dict(vector=torch.ones(2), dim=1.5), "dim must be an int"),
        (dict(vector=torch.ones(2), strength=float("nan")), "strength is a multiple"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(BendingError, match=message):
        Steer(**args)


def test_repr_shows_the_shape_not_the_values():
    knob = tb.BendingParameter("knob", 0.5)
    assert repr(Steer(torch.ones(64), strength=knob, rms=0.5)) == (
        "Steer(vector=<[64]>, strength=knob, rms=0.5)"
    )
    assert repr(Steer([1.0, 2.0], dim=1)) == "Steer(vector=<[2]>, dim=1)"


# -- a bended model: TorchScript export, configurations -------------------------------------------


class Net(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, channels, 3, padding=1)
        self.out = nn.Conv1d(channels, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.conv(x)))


def steered(channels: int, vector: torch.Tensor, dim: int = -2) -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net(channels))
    bended.trace(x=torch.zeros(1, 1, 32))
    strength = tb.BendingParameter("strength", 0.5, range=(-2.0, 2.0))
    bended.bend(Steer(vector, strength=strength, dim=dim, rms=0.3), "conv$")
    return bended


def test_a_torchscript_export_has_a_strength_setter_that_does_what_update_does():
    bended = steered(4, signed_randn(4))
    scripted = tb.export.torchscript(bended)
    x = torch.randn(2, 1, 32, generator=torch.Generator().manual_seed(1))
    for value in [1.5, -0.25, 0.0]:
        assert scripted.set_strength(value) == 0
        bended.update("strength", value)
        with torch.no_grad():
            assert torch.equal(scripted(x), bended(x)), value


@pytest.mark.parametrize("channels", [4, INLINE_MAX + 1])
def test_a_saved_configuration_renders_the_same_bit_for_bit(tmp_path, channels):
    vector = torch.randn(channels, generator=torch.Generator().manual_seed(2))
    bended = steered(channels, vector)
    x = torch.randn(1, 1, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = bended(x)
    bended.bending_config().save(tmp_path / "steer.json")
    written = json.loads((tmp_path / "steer.json").read_text())
    (tensor,) = [b["callback"]["args"]["vector"]["tensor"] for b in written["bendings"]]
    assert tensor["dtype"] == "float32" and tensor["shape"] == [channels]
    if channels <= INLINE_MAX:
        assert tensor["values"] == vector.tolist()  # plain numbers in the file
        assert not (tmp_path / "steer.safetensors").exists()
    else:
        assert tensor["file"] == "steer.safetensors" and "values" not in tensor
        assert (tmp_path / "steer.safetensors").read_bytes()[8:9] == b"{"  # a safetensors header
        with pytest.raises(BendingError, match=r"in the side file 'steer\.safetensors'"):
            tb.BendingConfig.from_dict(written)
    fresh = steered(channels, torch.ones(channels))
    fresh.reset()
    fresh.bend(tb.BendingConfig.load(tmp_path / "steer.json"))
    with torch.no_grad():
        assert torch.equal(bits(fresh(x)), bits(expected))
    (loaded,) = [b.callback for b in fresh.bendings]
    assert torch.equal(loaded.vector, vector) and loaded.rms == 0.3


def test_a_configuration_with_a_tensor_of_the_wrong_size_is_refused(tmp_path):
    steered(4, signed_randn(4)).bending_config().save(tmp_path / "steer.json")
    data = json.loads((tmp_path / "steer.json").read_text())
    data["bendings"][0]["callback"]["args"]["vector"]["tensor"]["shape"] = [5]
    with pytest.raises(BendingError, match=r"a tensor of shape \[5\] holds 5 values, got 4"):
        tb.BendingConfig.from_dict(data)
    tensor = data["bendings"][0]["callback"]["args"]["vector"]["tensor"]
    tensor.update(shape=[4], file="../x.safetensors", key="0")
    with pytest.raises(BendingError, match=r"vector.tensor: expected \{'dtype', 'shape', 'values'"):
        tb.BendingConfig.from_dict(data)  # values and a file
    del tensor["values"]
    with pytest.raises(BendingError, match="a safetensors file beside the configuration"):
        tb.BendingConfig.from_dict(data)


def test_gains_multiply_each_channel_by_its_exponential_in_nepers() -> None:
    gains = tb.Gains(torch.tensor([1.0, -1.0, 0.0]), strength=0.5, rms=math.log(4))
    x = torch.full((1, 3, 2), 3.0)
    unit = torch.tensor([1.0, -1.0, 0.0]) / math.sqrt(2 / 3)  # the vector over its RMS
    expected = x * torch.exp(unit * 0.5 * math.log(4))[None, :, None]
    torch.testing.assert_close(gains(x, "act"), expected)
    gains.strength = 0.0
    assert gains(x, "act") is x  # the identity, exactly
    weight = torch.ones(3, 2)
    gains.strength = 1.0
    torch.testing.assert_close(
        gains.bend_weight(weight, "w"), torch.exp(unit * math.log(4))[:, None].expand(3, 2)
    )
