"""Tests of controls set from a host: what nn~ passes a file's setters when a Pure Data or Max
patch sends ``[set NAME value(``, for bool and menu controls (declared to nn~ as text)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.export import nntilde, torchscript
from torchbend.export.nntilde import TYPE_HASH


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x))


def bended_net() -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    bended.trace(x=torch.randn(1, 1, 64))
    flip = tb.BendingParameter("flip", False)
    wave = tb.BendingParameter(
        "wave", 0, range=(0, 2), widget=tb.Widget(choices=("clean", "one", "two"))
    )
    bended.bend(tb.Tanh(active=flip), "conv$")
    bended.bend(tb.Quantize(wave), "tanh$")
    return bended


@pytest.fixture(scope="module")
def nn_file(tmp_path_factory: pytest.TempPathFactory) -> torch.jit.ScriptModule:
    path = tmp_path_factory.mktemp("host") / "net.ts"
    nntilde(bended_net(), path, params={"forward": [1, 1, 1, 1]})
    return torch.jit.load(str(path))


def pd_text(atom: float | str) -> str:
    """An atom of a Pd message as nn~ hands it on: a float through std::to_string."""
    return f"{atom:f}" if isinstance(atom, float) else atom


def nn_set(file: torch.jit.ScriptModule, name: str, atom: float | str) -> int:
    """What nn~ 1.6 does on ``[set name atom(``: parse the text by the attribute's type code
    (backend.cpp ``set_attribute``), then call the setter."""
    text = pd_text(atom)
    code = int(getattr(file, f"{name}_params")[0])
    value: bool | int | float | str
    if code == TYPE_HASH["bool"]:
        value = text.lower() not in ("0", "false")  # istream >> boolalpha, as measured
    elif code == TYPE_HASH["int"]:
        value = int(float(text))  # stoi: truncated
    elif code == TYPE_HASH["float"]:
        value = float(text)
    else:
        assert code == TYPE_HASH["str"]
        value = text
    return getattr(file, f"set_{name}")(value)


def nn_get(file: torch.jit.ScriptModule, name: str) -> str:
    """What nn~'s ``get_attribute_as_string`` prints: a str attribute's getter gives text."""
    (value,) = getattr(file, f"get_{name}")()
    assert isinstance(value, str)
    return value


def test_bool_and_menu_controls_are_text_attributes(nn_file):
    assert nn_file.flip_params.tolist() == [TYPE_HASH["str"]]
    assert nn_file.wave_params.tolist() == [TYPE_HASH["str"]]
    assert nn_get(nn_file, "flip") == "false" and nn_get(nn_file, "wave") == "clean"


@pytest.mark.parametrize(
    ("atom", "expected"),
    [
        (0.0, "false"),
        (1.0, "true"),
        (0.5, "true"),
        (-1.0, "true"),
        ("false", "false"),
        ("true", "true"),
        ("off", "false"),
        ("ON", "true"),
    ],
)
def test_a_bool_reads_pd_numbers_and_words(nn_file, atom, expected):
    assert nn_set(nn_file, "flip", "true" if expected == "false" else "false") == 0
    assert nn_set(nn_file, "flip", atom) == 0
    assert nn_get(nn_file, "flip") == expected


def test_set_flip_0_turns_a_bool_off(nn_file):
    """The old setter (a bool attribute) read ``[set flip 0(`` as on, and took no text."""
    assert nn_file.set_flip("1.000000") == 0
    assert nn_file.set_flip("0.000000") == 0
    assert nn_file.get_flip() == ("false",)


def test_a_bool_refuses_other_text(nn_file):
    assert nn_file.set_flip(True) == 0
    for text in ("maybe", "", "nan", "1e3"):
        assert nn_file.set_flip(text) == -1
    assert nn_get(nn_file, "flip") == "true"


@pytest.mark.parametrize(
    ("atom", "expected"),
    [(2.0, "two"), (2.7, "two"), (0.0, "clean"), (1.0, "one"), ("two", "two"), ("one", "one")],
)
def test_a_menu_reads_numbers_and_names(nn_file, atom, expected):
    assert nn_set(nn_file, "wave", "clean") == 0
    assert nn_set(nn_file, "wave", atom) == 0
    assert nn_get(nn_file, "wave") == expected


@pytest.mark.parametrize("atom", [3.0, -0.5, -1.0, "Two", "saw", ""])
def test_a_menu_refuses_what_is_not_an_entry(nn_file, atom):
    assert nn_set(nn_file, "wave", "one") == 0
    assert nn_set(nn_file, "wave", atom) == -1
    assert nn_get(nn_file, "wave") == "one"


def test_python_still_sets_the_values_themselves(nn_file):
    bended = bended_net()
    x = torch.randn(1, 1, 256)
    assert nn_file.set_flip(True) == 0 and nn_file.set_wave(2) == 0
    assert nn_file.set_wave(3) == -1 and nn_file.get_wave() == ("two",)
    bended.update("flip", True)
    bended.update("wave", 2)
    with torch.no_grad():
        expected = bended(x)
        assert torch.equal(nn_file(x), expected)
        assert nn_set(nn_file, "flip", 0.0) == 0 and nn_set(nn_file, "wave", "clean") == 0
        assert not torch.equal(nn_file(x), expected)
        assert nn_set(nn_file, "flip", "on") == 0 and nn_set(nn_file, "wave", 2.0) == 0
        assert torch.equal(nn_file(x), expected)


def test_plain_torchscript_keeps_typed_setters_and_getters():
    scripted = torchscript(bended_net())
    assert scripted.set_flip(True) == 0 and scripted.get_flip() is True
    assert scripted.set_wave(2) == 0 and scripted.get_wave() == 2
    with pytest.raises(RuntimeError):
        scripted.set_flip("true")
