"""Per-input graphs: guards, retracing, strict mode."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb


class Doug(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv_module = nn.Conv1d(1, 16, 3)
        self.batch_norm = nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor):
        if x.shape[1] > 1:
            return torch.cat([self.forward(x[:, [i]]) for i in range(x.shape[1])], -1)
        outs = []
        for i in range(x.shape[0]):
            outs.append(self.batch_norm(self.conv_module(x[[i]])))
        return sum(outs)


class Sign(nn.Module):
    """A data-dependent decision."""

    def forward(self, x):
        if x.mean() > 0:
            return x * 2
        return -x


class Loop(nn.Module):
    def forward(self, x, n: int = 2):
        for _ in range(n):
            x = x * 2
        return x


@pytest.fixture
def doug():
    torch.manual_seed(0)
    return Doug().eval()


def test_other_shapes_get_their_own_graph(doug):
    bended = tb.BendedModule(doug)
    bended.trace(x=torch.randn(1, 1, 16))
    for shape in [(1, 2, 16), (1, 1, 16), (2, 2, 8), (1, 2, 16)]:
        x = torch.randn(*shape)
        assert torch.allclose(bended(x), doug(x), atol=1e-6)
    assert len(bended.graphs("forward")) == 3


def test_lengths_not_read_by_decisions_reuse_the_graph(doug):
    bended = tb.BendedModule(doug)
    bended.trace(x=torch.randn(1, 1, 16))
    assert bended.graph().guard_facts == (("x", "shape", 0), ("x", "shape", 1))
    for length in (8, 32, 100):
        x = torch.randn(1, 1, length)
        assert torch.allclose(bended(x), doug(x), atol=1e-6)
    assert len(bended.graphs("forward")) == 1


def test_seed_example_now_dispatches_instead_of_failing(doug):
    bended = tb.BendedModule(doug)
    bended.trace(x=torch.randn(1, 1, 16))
    bended(torch.randn(1, 1, 16))
    x2 = torch.randn(1, 2, 16)
    assert torch.allclose(bended(x2), doug(x2), atol=1e-6)
    bended.trace(x=torch.randn(1, 2, 16))
    x1 = torch.randn(1, 1, 16)
    assert torch.allclose(bended(x1), doug(x1), atol=1e-6)
    steps = bended.graph().flow_steps
    assert [s.kind for s in steps[:2]] == ["logical", "loop"]
    assert steps[0].value is True and steps[0].file.endswith(
        f"test_guards.py:{Doug.forward.__code__.co_firstlineno + 1}"
    )


def test_strict_mode_names_the_decision(doug):
    bended = tb.BendedModule(doug, strict=True)
    bended.trace(x=torch.randn(1, 1, 16))
    bended(torch.randn(1, 1, 64))  # same decisions: accepted
    with pytest.raises(
        tb.GuardError,
        match=r"logical 'gt' at .*test_guards.py:\d+ \(forward\) was False when traced, now True",
    ):
        bended(torch.randn(1, 2, 16))


def test_data_dependent_decisions_are_checked_in_the_graph():
    bended = tb.BendedModule(Sign())
    pos, neg = torch.ones(3), -torch.ones(3)
    graph = bended.trace(x=pos)
    assert [s.checked for s in graph.flow_steps] == ["runtime"]
    assert torch.equal(bended(pos), pos * 2)
    assert torch.equal(bended(neg), neg.neg())
    assert len(bended.graphs("forward")) == 2
    assert torch.equal(bended(pos), pos * 2)
    assert torch.equal(bended(neg), neg.neg())
    assert len(bended.graphs("forward")) == 2


def test_strict_mode_data_dependent():
    bended = tb.BendedModule(Sign(), strict=True)
    bended.trace(x=torch.ones(3))
    with pytest.raises(tb.GuardError, match=r"'gt' at .* was True when traced, now False"):
        bended(-torch.ones(3))


def test_scalar_arguments_are_guarded_by_value():
    bended = tb.BendedModule(Loop())
    graph = bended.trace(x=torch.ones(2), n=3)
    assert graph.guard_facts == (("n", "value", None),)
    assert torch.equal(bended(torch.ones(2), n=3), torch.full((2,), 8.0))
    assert torch.equal(bended(torch.ones(2), n=1), torch.full((2,), 2.0))
    assert torch.equal(bended(torch.ones(2)), torch.full((2,), 4.0))


def test_train_and_eval_get_their_own_graphs():
    class Flag(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x

    module = Flag()
    bended = tb.BendedModule(module)
    bended.trace(x=torch.ones(2))
    assert torch.equal(bended(torch.ones(2)), torch.full((2,), 2.0))
    bended.eval()
    assert torch.equal(bended(torch.ones(2)), torch.ones(2))


def test_bendings_are_reapplied_to_new_graphs(doug):
    bended = tb.BendedModule(doug)
    bended.trace(x=torch.randn(1, 1, 16))
    bended.bend(tb.Scale(0.0), "conv_module")
    bended.bend(tb.Scale(0.0), "batch_norm.bias")
    x = torch.randn(2, 3, 16)
    assert torch.equal(bended(x), torch.zeros(1, 16, 42))
    assert "forward:conv_module_5" in bended.bended_keys()


def test_none_and_bool_arguments_stay_concrete():
    class Optional(nn.Module):
        def forward(self, x, mask=None, flip: bool = False):
            if mask is not None:
                x = x * mask
            return -x if flip else x

    bended = tb.BendedModule(Optional())
    x = torch.ones(3)
    bended.trace(x=x)
    assert torch.equal(bended(x), x)
    assert torch.equal(bended(x, mask=torch.zeros(3)), torch.zeros(3))
    assert torch.equal(bended(x, flip=True), -x)


def test_a_bending_that_flips_a_decision_gets_the_branch_it_leads_to():
    bended = tb.BendedModule(Sign())
    pos = torch.ones(3)
    bended.trace(x=pos)
    bended.bend(tb.Scale(-1.0), "x$")
    assert torch.equal(bended(pos), pos)  # -x is negative, so the model returns -(-x)
    bended.reset()
    assert torch.equal(bended(pos), pos * 2)
