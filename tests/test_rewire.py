"""Rewire: feeding what reads a node from another activation, as a bending reset() undoes."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks.rewire import Rewire


class Chain3(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, 4, 3, padding=1)
        self.b = nn.Conv1d(4, 4, 3, padding=1)
        self.c = nn.Conv1d(4, 4, 3, padding=1)
        self.out = nn.Conv1d(4, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.after(torch.tanh(self.b(torch.tanh(self.a(x)))))

    def after(self, h: torch.Tensor) -> torch.Tensor:
        """What follows ``tanh_1`` (a mean: an activation of another rank)."""
        y = self.out(self.c(h))
        return y + y.mean(-1)[..., None]


def setup() -> tuple[tb.BendedModule, Chain3, torch.Tensor]:
    torch.manual_seed(0)
    model = Chain3()
    bended = tb.BendedModule(model)
    x = torch.randn(2, 1, 16)
    bended.trace(x=x)
    return bended, model, x


def test_what_read_the_target_reads_the_source_and_reset_wires_back():
    bended, model, x = setup()
    plain = model(x)
    assert bended.bend(Rewire("a"), "tanh_1$") == ["forward:a", "forward:tanh_1"]
    assert torch.equal(bended(x), model.after(model.a(x)))
    bended.reset()
    assert torch.equal(bended(x), plain)


def test_amount_mixes_and_shapes_are_fitted():
    bended, model, x = setup()
    amount = tb.BendingParameter("rewire", 0.0)
    bended.bend(Rewire("a", amount=amount), "tanh_1$")
    assert torch.equal(bended(x), model(x))  # amount 0: the identity
    bended.update("rewire", 0.25)
    h = torch.tanh(model.b(torch.tanh(model.a(x))))
    assert torch.allclose(bended(x), model.after(torch.lerp(h, model.a(x), 0.25)))
    bended.reset()
    short = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 2, 4, stride=2), nn.Conv1d(2, 2, 1)))
    y = torch.randn(1, 1, 16)
    short.trace(input=y)
    short.bend(Rewire("input_1"), "_1$")  # [1, 1, 16] fitted to [1, 2, 7]: cropped, repeated
    got = short.get_activations("_1$", input=y)["_1"]
    assert torch.equal(got, y[:, [0, 0], :7])


def test_a_rewiring_is_saved_in_configs_and_exported():
    bended, model, x = setup()
    amount = tb.BendingParameter("rewire", 0.5)
    bended.bend(Rewire("a", amount=amount), "tanh_1$")
    data = bended.bending_config().to_dict(keys=False)
    assert data["bendings"][0]["patterns"] == ["tanh_1$"]
    again = tb.BendedModule(copy.deepcopy(model))
    again.trace(x=x)
    again.bend(tb.BendingConfig.from_dict(data))
    assert torch.equal(again(x), bended(x))
    scripted = tb.export.torchscript(bended)
    assert scripted.set_rewire(0.75) == 0
    bended.update("rewire", 0.75)
    with torch.no_grad():
        assert torch.equal(scripted(x), bended(x))


@pytest.mark.parametrize(
    ("source", "pattern", "message"),
    [
        ("tanh_1", "a$", r"cannot feed \['a'\] of forward: they are computed before 'tanh_1'"),
        ("nope", "tanh_1$", "forward has no activation 'nope'"),
        ("a", "mean$", r"cannot feed \['mean'\] of forward: their ranks differ"),
        ("a", r"b\.weight", "feeds activations from an activation; the patterns select weights"),
    ],
)
def test_impossible_wirings_are_refused(source, pattern, message):
    bended, model, x = setup()
    with pytest.raises(tb.SelectionError, match=message):
        bended.bend(Rewire(source), pattern)
    assert not bended.bendings and torch.equal(bended(x), model(x))
    with pytest.raises(tb.BendingError, match="source is the name of an activation"):
        Rewire("a b")
    with pytest.raises(tb.BendingError, match="Rewire takes no blend"):
        bended.bend(Rewire("a"), "tanh_1$", blend=0.5)
