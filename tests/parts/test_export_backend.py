"""The torch.export backend, alone and as the fallback of backend="auto"."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.norm = nn.LayerNorm(4)

    def forward(self, x, scale: float = 2.0):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return self.norm(x) * scale


class Ones(nn.Module):
    """``torch.ones(b, n)`` with traced sizes: the concrete tracer fails, torch.export does not."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        b, n = x.shape
        return self.lin(x) + torch.ones(b, n)


def test_export_backend_names_bends_resets_and_round_trips_a_config(tmp_path):
    torch.manual_seed(0)
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=x)
    assert bended.view().traced_by("forward") == "export"
    names = bended.activation_names()
    assert {"x", "layers_0", "layers_1", "norm"} <= set(names)
    assert not any(n.endswith("_weight") for n in names)  # weights are not activations
    assert torch.equal(bended(x), model(x))
    bended.bend(tb.Mask(0.5, dim=-1, seed=0), "layers_1$")
    bended.bend(tb.Scale(2.0), r"norm\.weight")
    bent = bended(x)
    assert not torch.allclose(bent, model(x))
    bended.bending_config().save(tmp_path / "bend.json")
    bended.reset()
    assert torch.equal(bended(x), model(x))
    other = tb.BendedModule(model, backend="export")
    other.trace(x=x)
    other.bend(tb.BendingConfig.load(tmp_path / "bend.json"))
    assert torch.equal(other(x), bent)
    assert torch.equal(model.norm.weight, torch.ones(4))  # the model's own weights untouched


def test_auto_falls_back_to_export_and_says_so():
    model, x = Ones(), torch.randn(2, 4)
    with pytest.raises(TypeError):
        tb.BendedModule(model).trace(x=x)
    bended = tb.BendedModule(model, backend="auto")
    bended.trace(x=x)
    assert bended.view().traced_by("forward") == "export"
    assert torch.equal(bended(x), model(x))
    assert "ones" in bended.activation_names()


def test_auto_keeps_the_concrete_tracer_where_it_works():
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="auto")
    bended.trace(x=x)
    assert bended.view().traced_by("forward") == "concrete"


def test_auto_says_what_each_backend_tripped_on():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x[: int(torch.rand(()) * 0 + 1 + x.sum().item() * 0)] + float(
                torch.tensor(x.sum().item()).numpy()
            )

    with pytest.raises(tb.TracingError) as e:
        tb.BendedModule(DataDependent(), backend="auto").trace(x=torch.ones(3))
    message = str(e.value)
    assert "no tracing backend could trace it" in message
    assert "- concrete backend:" in message and "- export backend:" in message


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(tb.TracingError, match=r"backend must be one of \['auto', 'concrete', "):
        tb.BendedModule(Encoder(), backend="dynamo")


def test_export_backend_graphs_export_to_torchscript_and_pt2_and_guard_scalars():
    torch.manual_seed(0)
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=x)
    assert torch.equal(bended(x, 3.0), model(x, 3.0))  # another scale: another graph
    assert len(bended.graphs()) == 2
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
    bended.trace(x=x)
    bended.bend(tb.Scale(gain), "layers_1$")
    scripted = tb.export.torchscript(bended)
    assert torch.allclose(scripted(x), bended(x))
    scripted.set_gain(0.5)
    bended.update("gain", 0.5)
    assert torch.allclose(scripted(x), bended(x))
    program = tb.export.pt2(bended, x=x)
    assert torch.allclose(program.module()(x=x), bended(x))
