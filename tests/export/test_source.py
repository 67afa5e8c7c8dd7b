"""Tests of torchbend.export.source: the TorchScript an export writes calls the rules Python
follows (torchbend.controls.rules), so an exported control lands where a Python one does."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.callbacks import Argument, BendingCallback
from torchbend.controls import BendingParameter, ControlView, rules  # noqa: F401 (read by eval)
from torchbend.export.plan import PlannedWrite
from torchbend.export.source import _argument_value


class Knobs(BendingCallback):
    """One argument of each kind."""

    gain = Argument(float, low=0.0, high=2.0, neutral=1.0, ramps=True)
    size = Argument(int, low=1, high=8, neutral=1)
    on = Argument(bool, neutral=False)

    def __init__(self, gain=1.0, size=1, on=False) -> None:
        super().__init__()
        self.gain = gain
        self.size = size
        self.on = on

    def bend(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * self.gain * self.size * float(self.on)


def _scripted(expression: str, kind: str):
    """``expression`` of a variable ``value`` of ``kind``, compiled by TorchScript."""
    unit = torch.jit.CompilationUnit(f"def f(value: {kind}):\n    return {expression}\n")
    return unit.f


@pytest.mark.parametrize("name", ["gain", "size", "on"])
def test_the_exported_assignment_computes_what_a_push_stores(name):
    p = BendingParameter("p", 0.5)
    argument = getattr(Knobs, name)
    values = [-1.0, -0.0, 0.0, 0.25, 0.7, 1.0, 5.0, 1e300, -math.inf]
    if argument.kind is int:  # a float beyond int64 would never reach it (set refuses it)
        values = values[:-2]
    for source in (p, 3 * p - 0.5, -p):
        text = _argument_value(PlannedWrite(0, "", argument, source), "value")
        scripted = _scripted(text, "float")
        for value in values:
            p.value = value  # what a set would push, unchecked: the rule brings it in bounds
            expected = argument.convert(source.get())
            assert eval(text, {"rules": rules, "value": value}) == expected
            got = scripted(value)
            assert got == expected and type(got) is type(expected), (source, value, got)
            if isinstance(expected, float):
                assert math.copysign(1.0, got) == math.copysign(1.0, expected)


def test_an_exported_ramp_is_the_python_ramp_at_every_call():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(1, 2, 3, padding=1), nn.Tanh())
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 16)
    bended.trace(input=x)
    gain = BendingParameter("gain", 0.3, ramp=3, range=(0.0, 2.0))
    scale = tb.Scale(2 * gain - 0.1)
    bended.bend(scale, "_1$")
    bended.update("gain", 0.9)
    with torch.no_grad():
        bended(x)  # exported one call into the ramp
        scripted = tb.export.torchscript(bended)
        exported = scripted.tb_callback_0.callback
        for step, value in enumerate([None, 0.1, None, None, 0.95, None, None, None]):
            if value is not None:
                assert scripted.set_gain(value) == 0
                bended.update("gain", value)
            assert exported._ramps["scale"] == scale._ramps["scale"], step
            assert exported.scale == scale.scale
            assert torch.equal(scripted(x), bended(x)), step
