"""Tests of tensor controls (tb.TensorParameter): set live in Python, in a TorchScript file and
in an nn~ file as nn~ sets a buffer attribute from a Pd array; refused where they cannot go."""

from __future__ import annotations

import json
import math
import threading

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.controls import ControlView, rules
from torchbend.export import nntilde, torchscript
from torchbend.export.contract import check_nntilde
from torchbend.export.nntilde import TYPE_HASH
from torchbend.export.reader import read_controls

CHANNELS = 4
VALUES = torch.tensor([0.5, -0.5, 1.0, 0.0])
PD_ARRAY = torch.linspace(-1.0, 1.0, 100)
"""A Pd array of another length than the control: resampled to it."""


class Net(nn.Module):
    """One channel in, CHANNELS inside (the activation ``tanh``), one out: pointwise in time."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(1, CHANNELS, 1)
        self.b = nn.Conv1d(CHANNELS, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


def signal() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(1, 1, 256)


def bended_with(callback: tb.BendingCallback, pattern: str = "tanh") -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    bended.trace(x=signal())
    bended.bend(callback, pattern)
    return bended


def gains_net(pattern: str = "tanh", dim: int = -2) -> tb.BendedModule:
    return bended_with(
        tb.Gains(tb.TensorParameter("gains", torch.zeros(CHANNELS)), dim=dim), pattern
    )


@pytest.mark.parametrize("cls", [tb.Gains, tb.Steer])
def test_update_gives_what_the_fixed_vector_gives(cls):
    """A vector set live bends as the same vector given fixed (which Steer and Gains divide
    by its RMS and multiply back: equal to float precision); zeros are the identity, bit for
    bit; no re-trace."""
    live = bended_with(cls(tb.TensorParameter("v", torch.zeros(CHANNELS))))
    x = signal()
    assert torch.equal(live(x), live.module(x))
    live.update("v", VALUES)
    fixed = bended_with(cls(VALUES.clone()))
    assert torch.allclose(live(x), fixed(x), atol=1e-6)
    assert not torch.allclose(live(x), live.module(x), atol=1e-3)
    live.update("v", [0.0] * CHANNELS)  # a list is taken too
    assert torch.equal(live(x), live.module(x))


def test_a_weight_bent_by_a_tensor_control_is_bent_again():
    bended = gains_net("a.weight", dim=0)
    x = signal()
    bended.update("gains", VALUES)
    expected = bended_with(tb.Gains(VALUES.clone(), dim=0), "a.weight")(x)
    assert torch.allclose(bended(x), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1.0, 2.0], "of length 4, got shape [2]"),
        (torch.zeros(2, 2), "of length 4, got shape [2, 2]"),
        (torch.zeros(4, dtype=torch.int64), "got a torch.int64 tensor"),
        (torch.tensor([0.0, math.nan, 0.0, 0.0]), "takes finite values"),
        ([0.0, math.inf, 0.0, 0.0], "takes finite values"),
        (0.5, "got float: 0.5"),
    ],
)
def test_update_refuses_what_the_control_does_not_take(value, expected):
    bended = gains_net()
    bended.update("gains", VALUES)
    with pytest.raises(tb.BendingError, match="tensor control 'gains' takes") as e:
        bended.update("gains", value)
    assert expected in str(e.value)
    assert torch.equal(bended.controllables["gains"].get(), VALUES)  # kept


def test_tensor_controls_go_only_where_a_vector_goes():
    p = tb.TensorParameter("v", torch.zeros(CHANNELS))
    with pytest.raises(tb.BendingError, match="tensor control, which callbacks take where"):
        tb.Scale(p)
    with pytest.raises(tb.BendingError, match="does not combine with numbers"):
        tb.Bias(2 * p)  # type: ignore[operator]
    with pytest.raises(tb.BendingError, match="does not combine with numbers"):
        ControlView(p, 2.0)
    with pytest.raises(tb.BendingError, match="leave rms out"):
        tb.Steer(p, rms=2.0)
    with pytest.raises(tb.BendingError, match="a 1-D tensor of floats"):
        tb.TensorParameter("v", torch.zeros(2, 2))
    scalar = tb.BendingParameter("s", 1.0)
    bended = bended_with(tb.Scale(scalar))
    with pytest.raises(tb.BendingError, match="control 's' takes a number, got Tensor"):
        bended.update("s", VALUES)


def test_the_configuration_saves_and_loads_a_tensor_control():
    bended = gains_net()
    bended.update("gains", VALUES)
    data = json.loads(json.dumps(bended.bending_config().to_dict()))
    assert data["controls"][0]["value"] == pytest.approx(VALUES.tolist())
    again = tb.BendedModule(bended.module)
    again.trace(x=signal())
    again.bend(tb.BendingConfig.from_dict(data))
    assert torch.equal(again(signal()), bended(signal()))
    data["controls"][0]["ramp"] = 4
    with pytest.raises(tb.BendingError, match=r"a tensor control.*takes no ramp"):
        tb.BendingConfig.from_dict(data)


def test_listings_show_or_leave_out_tensor_controls():
    bended = gains_net()
    assert bended.print_controls().rows[0][:3] == ["gains", "tensor", "<4 values>"]
    with pytest.raises(tb.ExportError, match=r"tensor controls \['gains'\] cannot be inputs"):
        tb.export.pt2(bended, controls_as_inputs=True, x=signal())


@pytest.fixture(scope="module")
def ts_file(tmp_path_factory: pytest.TempPathFactory) -> torch.jit.ScriptModule:
    return torchscript(gains_net(), tmp_path_factory.mktemp("ts") / "gains.ts")


def test_torchscript_setter_gives_what_python_gives(ts_file):
    python = gains_net()
    x = signal()
    assert ts_file.set_gains(VALUES) == 0
    python.update("gains", VALUES)
    assert torch.equal(ts_file(x), python(x))
    assert torch.equal(ts_file.get_gains(), VALUES)
    for bad in (torch.zeros(3), torch.zeros(4, dtype=torch.int32), torch.full((4,), math.nan)):
        assert ts_file.set_gains(bad) == -1
    assert torch.equal(ts_file.get_gains(), VALUES)  # kept
    assert torch.equal(ts_file(x), python(x))


def test_metadata_describes_a_tensor_control(ts_file, tmp_path):
    described = json.loads(ts_file.get_controls_json())["controls"][0]
    assert described["type"] == "tensor" and described["length"] == CHANNELS
    assert described["widget"]["kind"] == "array"
    path = tmp_path / "g.ts"
    torchscript(gains_net(), path)
    assert read_controls(path)[0]["length"] == CHANNELS


@pytest.fixture(scope="module")
def nn_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("nn") / "gains.ts"
    nntilde(gains_net(), path, params={"forward": [1, 1, 1, 1]})
    return str(path)


def test_nntilde_declares_a_buffer_attribute(nn_path):
    file = torch.jit.load(nn_path)
    assert file.get_buffer_attributes() == ["gains#0"]
    assert file.get_attributes() == ["gains"]
    assert file.gains_params.tolist() == [TYPE_HASH["buffer"]] == [5]
    assert file.get_gains() == ("",)
    assert check_nntilde(nn_path).attributes == ("gains",)


def test_nntilde_buffer_is_resampled_as_python_would(nn_path):
    """nn~ calls ``set_buffer_attribute`` with the Pd array's values (``[1, frames]``), then
    the setter with the array's name: the file bends as Python with the array resampled."""
    file = torch.jit.load(nn_path)
    python = gains_net()
    x = signal()
    assert file.set_buffer_attribute("gains#0", PD_ARRAY[None], 44100) == 0
    assert file.set_gains("curve") == 0
    assert file.get_gains() == ("curve",)
    python.update("gains", rules.resampled(PD_ARRAY, CHANNELS))
    assert torch.equal(file.forward(x), python(x))
    assert not torch.equal(file.forward(x), python.module(x))
    # Refused, the value kept: NaN, infinities, an empty array, a name that is no buffer.
    for bad in (torch.tensor([[0.0, math.nan]]), torch.tensor([[math.inf]]), torch.zeros(1, 0)):
        assert file.set_buffer_attribute("gains#0", bad, 44100) == -1
    assert file.set_buffer_attribute("other#0", PD_ARRAY[None], 44100) == -1
    assert torch.equal(file.forward(x), python(x))
    # Cleared: the initial value again.
    assert file.clear_buffer_attribute("gains#0") == 0
    assert file.get_gains() == ("",)
    assert torch.equal(file.forward(x), python.module(x))
    assert file.clear_buffer_attribute("other#0") == -1


def test_check_nntilde_refuses_a_buffer_attribute_of_no_buffer_type(nn_path, tmp_path):
    file = torch.jit.load(nn_path)
    file.gains_params.fill_(2)  # declared a float: nn~ would not pass it the array
    broken = tmp_path / "broken.ts"
    torch.jit.save(file, str(broken))
    with pytest.raises(tb.ExportError, match="'gains#0' must name an attribute 'gains' of type"):
        check_nntilde(broken)


def test_torchscript_bends_a_weight_again_when_a_tensor_control_is_set(tmp_path):
    python = gains_net("a.weight", dim=0)
    file = torchscript(gains_net("a.weight", dim=0), tmp_path / "w.ts")
    x = signal()
    assert file.set_gains(VALUES) == 0
    python.update("gains", VALUES)
    assert torch.equal(file(x), python(x))
    assert not torch.equal(file(x), python.module(x))


def test_the_studio_leaves_a_tensor_control_out_of_its_forms(tmp_path):
    from torchbend.errors import StudioError
    from torchbend.studio.bending import BendingEditor

    editor = BendingEditor(gains_net(), threading.RLock(), tmp_path)
    state = json.loads(json.dumps(editor.state()))  # JSON-able, the tensor as a list
    assert state["controls"] == []
    assert state["config"]["controls"][0]["value"] == [0.0] * CHANNELS
    with pytest.raises(StudioError, match="tensor control 'gains' takes"):
        editor.set_control("gains", 0.5)
