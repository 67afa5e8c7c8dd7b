"""The tracing zoo: every module traces, runs as eager does, and where torch.fx fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from conftest import (
    ZOO,
    Doug,
    Greg,
    LogicalFoo,
    LoopFoo,
    ShapeFoo,
    ZooEntry,
    check_traced,
    fx_failure,
)

import torchbend as tb

RANDOM = [e for e in ZOO if e.random]


def test_zoo_is_complete():
    names = [e.name for e in ZOO]
    assert len(names) == len(set(names)) >= 25
    assert sum(e.requires == "transformers" for e in ZOO) >= 3


def test_traced_equals_eager(zoo_entry: ZooEntry):
    check_traced(
        zoo_entry.module(),
        zoo_entry.inputs,
        zoo_entry.extra,
        atol=zoo_entry.atol,
        rtol=zoo_entry.rtol,
    )


def test_torch_fx_differential(zoo_entry: ZooEntry):
    """``fx_fails`` says what plain torch.fx does; torchbend passes on every entry."""
    failure = fx_failure(
        zoo_entry.module(),
        zoo_entry.inputs,
        zoo_entry.extra,
        atol=zoo_entry.atol,
        rtol=zoo_entry.rtol,
    )
    assert (failure is not None) == zoo_entry.fx_fails, failure or "torch.fx traces it correctly"


def test_docs_table_is_current():
    """docs/tracing.md lists the zoo as it is (rewrite it with scripts/zoo_table.py)."""
    page = (Path(__file__).parents[2] / "docs" / "tracing.md").read_text()
    table = page.split("<!-- zoo-table:start -->")[1].split("<!-- zoo-table:end -->")[0]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = cells
    assert list(rows) == [e.name for e in ZOO]
    for entry in ZOO:
        _, tricky, fx, torchbend = rows[entry.name]
        assert tricky == entry.tricky.replace("|", "\\|"), entry.name
        assert fx.startswith("✗" if entry.fx_fails else "✓"), entry.name
        assert torchbend.startswith("✓"), entry.name


@pytest.mark.parametrize("entry", RANDOM, ids=[e.name for e in RANDOM])
def test_random_modules_draw_anew(entry: ZooEntry):
    bended = tb.BendedModule(entry.module())
    bended.trace(**entry.inputs)
    torch.manual_seed(0)
    first, second = bended(**entry.inputs), bended(**entry.inputs)
    assert not torch.equal(first, second)
    torch.manual_seed(0)
    assert torch.equal(bended(**entry.inputs), first)


# The seed notebook (torchbend-extended-tracing), cell by cell -----------------------------------


def test_notebook_doug():
    module = Doug()
    with pytest.raises(torch.fx.proxy.TraceError, match="control flow"):
        torch.fx.symbolic_trace(module)
    bended = tb.BendedModule(module)
    bended.trace(x=torch.randn(1, 1, 16))
    text = str(bended.graph())
    assert "conv_module" in text and "batch_norm" in text

    bended = tb.BendedModule(Doug())
    one = str(bended.trace(x=torch.randn(1, 1, 16)))
    two = str(bended.trace(x=torch.randn(1, 2, 16)))
    assert two.count("conv_module") == 2 * one.count("conv_module")


def test_notebook_doug_calls_with_other_shapes():
    # The notebook raised on these calls; graphs are now traced again for inputs that take
    # other decisions.
    module = Doug().eval()
    bended = tb.BendedModule(module)
    bended.trace(x=torch.randn(1, 1, 16))
    for shape in [(1, 1, 16), (1, 2, 16), (1, 1, 16)]:
        x = torch.randn(shape)
        assert torch.equal(bended(x), module(x))
    steps = bended.graph().flow_steps
    assert [(s.kind, s.value) for s in steps] == [("logical", False), ("loop", 1)]
    assert repr(steps[0]).startswith("LogicalFlowStep(name=gt, value=False, file=")

    bended.trace(x=torch.randn(1, 2, 16))
    kinds = [(s.kind, s.value) for s in bended.graph().flow_steps]
    assert kinds[0] == ("logical", True) and kinds.count(("logical", False)) == 2


def test_notebook_loopfoo():
    bended = tb.BendedModule(LoopFoo())
    graph, out = bended.trace(x=torch.tensor(2), n=4, _return_out=True)
    assert out == 65536
    assert [(s.kind, s.name, s.value, s.checked) for s in graph.flow_steps] == [
        ("loop", "n", 4, "signature")
    ]
    assert repr(graph.flow_steps[0]).startswith("LoopFlowStep(name=n, value=4")


def test_notebook_logicalfoo():
    with pytest.raises(torch.fx.proxy.TraceError, match="control flow"):
        torch.fx.symbolic_trace(LogicalFoo())
    bended = tb.BendedModule(LogicalFoo())
    graph, out = bended.trace(x=torch.tensor(0), _return_out=True)
    assert out == 0
    assert [(s.kind, s.value, s.checked) for s in graph.flow_steps] == [
        ("logical", False, "runtime")
    ]
    assert bended(torch.tensor(1)) == 1


def test_notebook_shapefoo():
    bended = tb.BendedModule(ShapeFoo())
    graph, out = bended.trace(x=torch.ones(4), _return_out=True)
    assert torch.equal(out, torch.full((4,), 4.0))
    assert graph.flow_steps == []
    assert torch.equal(bended(torch.ones(6)), torch.full((6,), 6.0))


def test_notebook_greg(capsys: pytest.CaptureFixture[str]):
    module = Greg()
    bended = tb.BendedModule(module)
    x = torch.randn(1, 1, 16)
    _, out = bended.trace(x=x, _return_out=True)
    bended.print_activations()
    assert "conv_module" in capsys.readouterr().out
    assert torch.equal(out, module(x))

    bended.bend(tb.Bias(1.0), "conv_module$")
    assert torch.allclose(bended(x), module(x) + 1)
    bended(torch.randn(4, 1, 32))

    bended.reset()
    bended.bend(tb.Mask(0.3), "conv_module$")
    bended(x)
    with pytest.raises(tb.BendingError, match="dim="):  # a mask shaped like one activation
        bended(torch.randn(4, 1, 32))

    bended.reset()
    bended.bend(tb.Mask(prob=0.3, dim=-2), "conv_module$")
    bended(x)
    assert bended(torch.randn(4, 1, 32)).shape == (4, 4, 30)
