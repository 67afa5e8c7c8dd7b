"""Tensordict modules: TensorDict in, TensorDict out, nested keys, bending."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb

tensordict = pytest.importorskip("tensordict")
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import NormalParamExtractor  # noqa: E402
from tensordict.nn import TensorDictModule as Mod  # noqa: E402
from tensordict.nn import TensorDictSequential as Seq  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(100, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Masker(nn.Module):
    def forward(self, x, mask):
        return torch.softmax(x * mask, dim=1)


def make_input() -> TensorDict:
    torch.manual_seed(0)
    return TensorDict(
        {
            "input": TensorDict(
                {
                    "x": torch.rand(32, 100),
                    "mask": torch.randint(0, 2, (32, 10), dtype=torch.uint8),
                },
                [32],
            )
        },
        [32],
    )


def test_sequential_traces_and_matches():
    torch.manual_seed(0)
    net = Mod(Net(), in_keys=[("input", "x")], out_keys=[("intermediate", "x")])
    masker = Mod(
        Masker(),
        in_keys=[("intermediate", "x"), ("input", "mask")],
        out_keys=[("output", "probabilities")],
    )
    module = Seq(net, masker)
    bended = tb.BendedModule(module)
    bended.trace(tensordict=make_input())
    out, ref = bended(make_input()), module(make_input())
    assert isinstance(out, TensorDict)
    assert torch.equal(out["output", "probabilities"], ref["output", "probabilities"])
    assert torch.equal(out["intermediate", "x"], ref["intermediate", "x"])
    assert "module_0_module_fc1" in bended.activation_names()
    assert bended.bend(tb.Scale(0.0), r"module\.0\.module\.fc2\.") == [
        "module.0.module.fc2.weight",
        "module.0.module.fc2.bias",
    ]
    out = bended(make_input())
    assert torch.equal(out["intermediate", "x"], torch.zeros(32, 10))
    bended.reset()
    bended.bend(tb.Scale(0.0), "softmax$")
    assert torch.equal(bended(make_input())["output", "probabilities"], torch.zeros(32, 10))


def test_export_tutorial_model():
    torch.manual_seed(0)
    model = Seq(
        Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
        Mod(nn.ReLU(), in_keys=["hidden"], out_keys=["hidden"]),
        Mod(nn.Linear(4, 4), in_keys=["hidden"], out_keys=["latent"]),
        Mod(NormalParamExtractor(), in_keys=["latent"], out_keys=["loc", "scale"]),
    )
    td = TensorDict({"x": torch.randn(1, 3)}, [1])
    bended = tb.BendedModule(model)
    bended.trace(tensordict=td.clone())
    out, ref = bended(td.clone()), model(td.clone())
    for key in ("hidden", "latent", "loc", "scale"):
        assert torch.equal(out[key], ref[key])


def test_lambda_modules_with_nested_keys():
    model = Seq(
        Mod(lambda x: x + 1, in_keys=[("some", "key")], out_keys=["hidden"]),
        Mod(lambda x: x - 1, in_keys=["hidden"], out_keys=[("some", "output")]),
    )
    td = TensorDict({"some": TensorDict({"key": torch.randn(2, 3)}, [2])}, [2])
    bended = tb.BendedModule(model)
    bended.trace(tensordict=td.clone())
    out = bended(td.clone())
    assert torch.allclose(out["some", "output"], td["some", "key"])
    bended.bend(tb.Scale(2.0), "add$")
    assert torch.allclose(bended(td.clone())["some", "output"], 2 * (td["some", "key"] + 1) - 1)


def test_a_sequence_called_by_its_in_keys_as_tensordict_dispatches():
    """``module(x=tensor)``, as tensordict allows (and the export tutorial uses)."""
    torch.manual_seed(0)
    seq = Seq(Mod(nn.Linear(3, 4), ["x"], ["h"]), Mod(nn.ReLU(), ["h"], ["y"]))
    x = torch.randn(2, 3)
    bended = tb.BendedModule(seq)
    bended.trace(x=x)
    h, y = bended(x=x)
    expected_h, expected_y = seq(x=x)
    assert torch.equal(h, expected_h) and torch.equal(y, expected_y)
    bended.bend(tb.Scale(0.0), "module_0_module$")
    assert torch.equal(bended(x=x)[1], torch.zeros(2, 4))
    assert torch.equal(seq(x=x)[1], expected_y)  # the module itself is untouched
