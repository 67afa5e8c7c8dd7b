"""The engine's parts are wired by their constructors: no part sets another's attributes, at
construction or while the module is traced, bent, called, updated and reset."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.engine import Engine
from torchbend.engine.bendings import BendingSet
from torchbend.engine.board import ControlBoard
from torchbend.engine.entries import EntryTracer
from torchbend.engine.inspector import Inspector
from torchbend.engine.methods import MethodTable
from torchbend.engine.weights import WeightBank

PARTS = (WeightBank, BendingSet, MethodTable, EntryTracer, ControlBoard, Inspector, Engine)


@pytest.fixture
def outside_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every attribute of a part assigned by code that is not a method of that part."""
    found: list[str] = []

    def watch(cls: type) -> None:
        def setattr_(self: Any, name: str, value: Any) -> None:
            caller = sys._getframe(1).f_locals.get("self")
            if caller is not self:
                found.append(f"{type(caller).__name__} set {cls.__name__}.{name}")
            object.__setattr__(self, name, value)

        monkeypatch.setattr(cls, "__setattr__", setattr_)

    for cls in PARTS:
        watch(cls)
    yield found


def test_building_and_using_a_bended_module_sets_no_attribute_of_a_part_from_outside(
    outside_writes: list[str],
):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 4, 3), nn.Tanh(), nn.Conv1d(4, 1, 3))
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 32)
    bended.trace(input=x)
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0), ramp=2)
    bended.bend(tb.Scale(gain), "^0\\.weight$", "_1$")
    bended(x)
    bended.update("gain", 0.5)
    bended(x)
    bended(x)
    bended.guard = True
    bended.sample_rate = 100
    with bended.set_version("original"):
        bended(x)
    bended.reset()
    assert outside_writes == []


def test_parts_have_no_hook_attributes_to_be_set_after_construction():
    engine = Engine(nn.Linear(2, 2))
    for name in ("listeners", "bender", "view"):
        assert not hasattr(engine.weights, name)
    assert not hasattr(engine.table, "root")
    assert isinstance(engine.table.reserved, frozenset)
    assert engine.weights.bent_module is engine.module  # nothing bent: the module itself


def test_the_bank_tells_the_table_of_each_new_bent_module():
    bended = tb.BendedModule(nn.Sequential(nn.Linear(3, 3)))
    x = torch.randn(2, 3)
    bended.trace(input=x)
    bended.bend(tb.Scale(0.0), "0.weight")
    assert torch.equal(bended(x), bended.module[0].bias.expand(2, 3))
    bended.reset()
    assert torch.equal(bended(x), bended.module(x))
