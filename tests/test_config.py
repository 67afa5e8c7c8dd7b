"""Bending configurations: build, bind, compare, save to JSON and load back exactly."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.config import FORMAT, VERSION


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)
        self.out = nn.Conv1d(4, 1, 3, padding=1)

    def forward(self, x):
        return self.out(torch.tanh(self.conv(x)))


def fresh() -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Net())
    bended.trace(x=torch.randn(1, 1, 32))
    return bended


def test_config_of_a_bended_module_round_trips_exactly(tmp_path):
    x = torch.randn(2, 1, 32)
    gain = tb.BendingParameter("gain", 0.7, range=(0.0, 2.0))
    bended = fresh()
    bended.bend(tb.Mask(0.5, dim=-2, seed=3), "conv$")
    bended.bend(tb.Scale(2.0 * gain) >> tb.Bias(1 - gain), r"out\.weight")
    bended.bend(tb.Noise(0.1, seed=1), "conv.bias")
    expected = bended(x)
    config = bended.bending_config()
    assert next(i.callback for i in config if "forward:conv" in i.keys).__class__ is tb.Mask
    path = tmp_path / "bends.json"
    config.save(path)
    text = path.read_text()
    assert json.loads(text)["controls"] == [
        {"name": "gain", "value": 0.7, "range": [0.0, 2.0], "clamp": False, "ramp": 0}
    ]
    loaded = tb.BendingConfig.load(path)
    assert loaded == config
    other = fresh()
    assert other.bend(loaded) == ["forward:conv", "out.weight", "conv.bias"]
    assert torch.equal(other(x), expected)
    other.update("gain", 1.5)
    bended.update("gain", 1.5)
    assert torch.equal(other(x), bended(x))


def test_build_by_hand_select_and_concatenate():
    a = tb.BendingConfig((tb.Scale(2.0), "conv$"))
    b = tb.BendingConfig((tb.Bias(1.0), "out.*", "conv.weight"))
    both = a + b
    assert len(both) == 2
    bended = fresh()
    keys = [bended.select(*item.patterns, fn=item.fn) for item in both]
    assert keys[1] == ["conv.weight", "out.weight", "out.bias", "forward:out"]
    assert next(i.callback for i, k in zip(both, keys) if "conv.weight" in k).bias == 1.0
    assert both != a
    assert a == tb.BendingConfig((tb.Scale(2.0), "conv$"))


def test_bad_configs(tmp_path):
    with pytest.raises(tb.BendingError, match=r"takes \(callback, pattern"):
        tb.BendingConfig(tb.Scale(2.0))
    with pytest.raises(tb.BendingError, match="must be a BendingCallback"):
        tb.BendingConfig(("Scale", "conv"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(tb.BendingError, match="not valid JSON"):
        tb.BendingConfig.load(bad)
    with pytest.raises(tb.BendingError, match="no bending configuration at"):
        tb.BendingConfig.load(tmp_path / "missing.json")
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(tb.BendingError, match="not a torchbend bending configuration"):
        tb.BendingConfig.load(bad)
    good = tb.BendingConfig((tb.Scale(2.0), "conv$")).to_dict()
    good["bendings"][0]["callback"]["class"] = "NoSuchCallback"
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match="NoSuchCallback"):
        tb.BendingConfig.load(bad)
    good["bendings"][0]["callback"] = {"class": "Scale", "args": {"scael": 2.0}}
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match="does not take these arguments"):
        tb.BendingConfig.load(bad)
    good["bendings"][0]["callback"] = {"class": "os:system", "args": {}}
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match=r"not a bending callback|BendingCallback"):
        tb.BendingConfig.load(bad)
    good["bendings"][0]["callback"] = {"class": "Scale", "args": {"scale": 2.0}}
    del good["bendings"][0]["patterns"]
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match="malformed"):
        tb.BendingConfig.load(bad)


def test_unseeded_stochastic_callbacks_warn_on_save(tmp_path):
    with pytest.warns(UserWarning, match="seed"):
        tb.BendingConfig((tb.Mask(0.5), "conv$")).save(tmp_path / "m.json")


def test_unsaveable_callbacks_say_why(tmp_path):
    config = tb.BendingConfig((tb.Lambda(lambda x: x), "conv$"))
    with pytest.raises(tb.BendingError, match=r"cannot be saved|defined in a script"):
        config.save(tmp_path / "x.json")


HOSTILE = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")  # code run just by being imported


class X:  # not even a callback
    pass
"""

FRIENDLY = """
import torchbend as tb


class Gain(tb.Scale):
    pass
"""


def _config_naming(cls: str) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "controls": [],
        "bendings": [{"callback": {"class": cls, "args": {}}, "patterns": ["x"], "fn": None}],
    }


def test_loading_a_config_never_imports_a_module_it_names(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "marker"
    (tmp_path / "hostile_module.py").write_text(HOSTILE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))  # where a notebook's folder would be
    path = tmp_path / "bends.json"
    path.write_text(json.dumps(_config_naming("hostile_module:X")))
    with pytest.raises(tb.BendingError, match="never imports a module") as e:
        tb.BendingConfig.load(path)
    assert "bending 0" in str(e.value) and "allow=['hostile_module']" in str(e.value)
    assert not marker.exists()
    # OSC and the command's --config refuse the same way.
    from torchbend.cli import main

    out = str(tmp_path / "m.ts")
    code = main(["export", "tiny_rave", "--input", "1x1x256", "--config", str(path), "-o", out])
    assert code == 2 and "never imports" in capsys.readouterr().err
    assert not marker.exists()
    # Named explicitly, the module is imported: its class is then checked.
    with pytest.raises(tb.BendingError, match="not a bending callback"):
        tb.BendingConfig.load(path, allow=["hostile_module"])
    assert marker.exists()


def test_a_config_finds_callbacks_of_modules_already_imported_or_loaded_files(tmp_path):
    plugin = tmp_path / "gains.py"
    plugin.write_text(FRIENDLY)
    tb.load_callbacks(plugin)
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Tanh()))
    bended.trace(input=torch.randn(1, 1, 4))
    gain = sys.modules["torchbend_user_callbacks.gains"].Gain(0.5)
    bended.bend(gain, "_1$")
    path = tmp_path / "bends.json"
    bended.bending_config().save(path)
    config = tb.BendingConfig.load(path)
    assert type(config.items[0].callback).__name__ == "Gain"
