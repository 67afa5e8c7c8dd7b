"""Bending configurations: build, bind, compare, save to JSON and load back exactly."""

from __future__ import annotations

import copy
import json
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import torchbend as tb
from torchbend.config import FORMAT, VERSION
from torchbend.controls import Widget


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


def test_widgets_round_trip_and_only_what_differs_from_the_derived_one_is_saved(tmp_path):
    cutoff = tb.BendingParameter(
        "cutoff",
        0.5,
        range=(0.01, 1.0),
        widget=Widget(unit="Hz", curve="log", label="Cutoff", group="filter", step=0.01),
    )
    wave = tb.BendingParameter("wave", 1, range=(0, 2), widget=Widget(choices=("a", "b", "c")))
    mute = tb.BendingParameter("mute", False, widget=Widget(group="filter"))
    plain = tb.BendingParameter("plain", 1.0)
    config = tb.BendingConfig(
        (tb.Scale(cutoff) >> tb.Bias(plain), "conv$"),
        (tb.Roll(wave), "out$"),
        (tb.Invert(active=mute), "x"),
    )
    path = tmp_path / "bends.json"
    config.save(path)
    saved = {c["name"]: c for c in json.loads(path.read_text())["controls"]}
    assert saved["cutoff"]["widget"] == {
        "unit": "Hz",
        "curve": "log",
        "label": "Cutoff",
        "group": "filter",
        "step": 0.01,
    }
    assert saved["wave"]["widget"] == {"kind": "menu", "choices": ["a", "b", "c"]}
    assert saved["mute"]["widget"] == {"group": "filter"}
    assert "widget" not in saved["plain"]  # derived whole: nothing to save, as before widgets
    loaded = tb.BendingConfig.load(path)
    assert loaded == config
    assert {c.name: c.widget for c in loaded.controls()} == {
        c.name: c.widget for c in config.controls()
    }


def test_configs_refuse_or_clamp_out_of_range_values_as_update_does():
    def scaled(**control: object) -> dict:
        return _scaled_by({"name": "k", "range": [0.0, 1.0], **control})

    with pytest.raises(
        tb.BendingError, match=r"^bends.json, control 0: control 'k': 5.0 is out of its range"
    ):
        tb.BendingConfig.from_dict(scaled(value=5.0), source="bends.json")
    loaded = tb.BendingConfig.from_dict(scaled(value=5.0, clamp=True)).controls()[0]
    twin = tb.BendingParameter("k", 0.5, range=(0.0, 1.0), clamp=True)
    twin.set(5.0)
    assert loaded.get() == twin.get() == 1.0
    noisy = _config(
        {"class": "Noise", "args": {"std": {"control": "k"}}},
        controls=[{"name": "k", "value": -1.0, "clamp": True}],
    )
    with pytest.raises(tb.BendingError, match=r"bending 0: .*std .* must be a finite number >= 0"):
        tb.BendingConfig.from_dict(noisy, source="bends.json")


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
    with pytest.raises(tb.BendingError, match="Scale does not take the argument 'scael'; "):
        tb.BendingConfig.load(bad)
    good["bendings"][0]["callback"] = {"class": "os:system", "args": {}}
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match=r"not a bending callback|BendingCallback"):
        tb.BendingConfig.load(bad)
    good["bendings"][0]["callback"] = {"class": "Scale", "args": {"scale": 2.0}}
    del good["bendings"][0]["patterns"]
    bad.write_text(json.dumps(good))
    with pytest.raises(tb.BendingError, match=r"bad.json, bending 0: missing field 'patterns'"):
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


# -- garbage in, BendingError out -----------------------------------------------------------------


def _config(callback: dict, patterns: object = ("x",), controls: list | None = None, **bending):
    return {
        "format": FORMAT,
        "version": VERSION,
        "controls": controls or [],
        "bendings": [{"callback": callback, "patterns": list(patterns), **bending}],
    }


def _scaled_by(control: dict) -> dict:
    return _config({"class": "Scale", "args": {"scale": {"control": "k"}}}, controls=[control])


def _nested(depth: int) -> object:
    value: object = 1.0
    for _ in range(depth):
        value = [value]
    return value


def _chained(depth: int) -> dict:
    callback: dict = {"class": "Scale", "args": {}}
    for _ in range(depth):
        callback = {"class": "Noise", "args": {"std": {"callback": callback}}}
    return callback


GARBAGE = [
    (
        _config({"class": "Scale", "args": [2.0]}),
        r"^bends.json, bending 0, callback.args: expected an object of arguments by name, "
        r"got \[2.0\]$",
    ),
    (
        _scaled_by({"name": "k", "value": 1.0, "range": [1]}),
        r"^bends.json, control 0, range: expected null or \[low, high\], two finite numbers, "
        r"got \[1\]$",
    ),
    (
        _config({"class": "Scale", "args": {}}, fn=5),
        r"bending 0, fn: expected null, a method's name or a list of methods' names, got 5$",
    ),
    (_config({"class": "", "args": {}}), r"bending 0, callback.class: expected a callback's"),
    (_config({"class": "a..b:C"}), r"bending 0, callback.class: expected a callback's class"),
    (
        _config({"class": "Scale", "args": {"scale": _nested(5000)}}),
        r"bending 0, callback: lists and objects nest more than 32 levels deep",
    ),
    (_config(_chained(5000)), r"bending 0, callback: lists and objects nest more than 32"),
    (
        {**_config({"class": "Scale"}), "bendings": [{"callback": {"class": "Scale"}}] * 2},
        r"^bends.json, bending 0: missing field 'patterns'",
    ),
    (
        {
            **_config({"class": "Scale"}),
            "bendings": [{"callback": {"class": "Scale"}, "patterns": "_1$"}],
        },
        r"bending 0, patterns: expected a list of one or more regular expressions, got '_1\$'; "
        r"write \['_1\$'\] for a list of one$",
    ),
    (
        {
            **_config({"class": "Scale"}),
            "bendings": [{"callback": {"class": "Scale"}, "patterns": ["("]}],
        },
        r"bending 0, patterns\[0\]: '\(' is not a regular expression: missing \)",
    ),
    (
        _config(
            {"class": "Scale", "args": {"scale": {"control": "k"}}},
            controls=[{"name": "k", "value": 1.0}, {"name": "k", "value": 2.0}],
        ),
        r"^bends.json, control 1: control 0 is already named 'k'; give each control its own name$",
    ),
    *[
        (
            _scaled_by({"name": "k", "value": 1.0, "ramp": ramp}),
            rf"control 0, ramp: expected a number of calls from 0 to 65536, got {shown}$",
        )
        for ramp, shown in [
            (-1, "-1"),
            (float("nan"), "nan"),
            (float("inf"), "inf"),
            (1e12, "1000000000000.0"),
            (2.5, "2.5"),
            (True, "True"),
        ]
    ],
    (
        _config({"class": "Scale", "args": {"scale": 10**400}}),
        r"bending 0, callback.args.scale: expected a number, got an int of about 400 digits",
    ),
    (
        _scaled_by({"name": "k", "value": 10**400}),
        r"control 0, value: expected a number, got an int of about 400 digits",
    ),
    (
        _scaled_by({"name": "k", "value": float("nan")}),
        r"control 0, value: expected a finite number, a bool or a list of finite numbers, got nan$",
    ),
    (
        _scaled_by({"name": "k", "value": 1.0, "range": [0, float("inf")]}),
        r"control 0, range\[1\]: expected a finite number, got inf$",
    ),
    (
        _config(
            {"class": "Scale", "args": {"scale": {"control": "k", "scale": float("-inf")}}},
            controls=[{"name": "k", "value": 1.0}],
        ),
        r"bending 0, callback.args.scale.scale: expected a finite number, got -inf$",
    ),
    (
        _config({"class": "Scale", "args": {"scale": float("nan")}}),
        r"bending 0: Scale: scale must be a finite number, got nan$",
    ),
    (
        _config({"class": "Noise", "args": {"seed": 2**64}}),
        r"bending 0: Noise: seed must be an int of 64 bits .* got 18446744073709551616$",
    ),
    (
        _config({"class": "Erode", "args": {"size": 10**20}}),
        r"bending 0: Erode: size is a window in samples and must be at most 65536",
    ),
    (
        _config(
            {"class": "Noise", "args": {"std": {"control": "k"}}},
            controls=[{"name": "k", "value": -1.0}],
        ),
        r"bending 0: Noise: std is a standard deviation and must be a finite number >= 0",
    ),
    (
        _scaled_by({"name": "k", "value": 1.0, "rnage": [0, 1]}),
        r"control 0: unknown field 'rnage'; did you mean 'range'\?",
    ),
    (
        _config({"class": "Scale", "args": {"scale": {"contrl": "k"}}}),
        r"bending 0, callback.args.scale: expected \{'control': name\}, .* got \{'contrl': 'k'\}$",
    ),
    (
        _config({"class": "Scale", "args": {"scale": {1, 2}}}),
        r"bending 0, callback.args.scale: expected a number, a string, .* got \{1, 2\}$",
    ),
    ({**_config({"class": "Scale"}), "version": True}, r"has format version True"),
    ({**_config({"class": "Scale"}), "bendings": None}, r"bendings: expected a list of bendings"),
    (
        _config({"class": "Scale", "args": {"scael": 2.0}}),
        r"Scale does not take the argument 'scael'; it takes scale; did you mean 'scale'\?$",
    ),
    (_config({"class": "Ablate", "args": {"channels": "ab"}}), r"^bends.json, bending 0: "),
    (_config({"class": "Chain"}), r"^bends.json, bending 0, callback: .*args"),
    *[
        (_scaled_by({"name": "k", "value": 1.0, "range": [1, 2], "widget": widget}), message)
        for widget, message in [
            ("knob", r"control 0, widget: expected a control's widget: an object of interface"),
            ({"kind": "dial"}, r"control 0, widget.kind: expected one of 'knob', .* got 'dial'$"),
            ({"unti": "Hz"}, r"control 0, widget: unknown field 'unti'; did you mean 'unit'\?"),
            ({"curve": "lg"}, r"control 0, widget.curve: expected one of 'linear', 'log', 'exp'"),
            ({"unit": 3}, r"control 0, widget.unit: expected a unit: a string .*, got 3$"),
            ({"label": ""}, r"control 0, widget.label: expected a label: a non-empty string"),
            ({"choices": "a"}, r"widget.choices: .*, got 'a'; write \['a'\] for a list of one$"),
            ({"choices": ["a", "a"]}, r"widget.choices: expected a list of distinct menu entries"),
            ({"step": 0}, r"control 0, widget.step: expected a finite number > 0, or null, got 0"),
            ({"kind": "toggle"}, r"control 0: control 'k': a toggle draws bool controls"),
        ]
    ],
    (
        _scaled_by({"name": "k", "value": 1.0, "range": [0, 2], "widget": {"curve": "log"}}),
        r"^bends.json, control 0: control 'k': a log curve needs a range of positive numbers",
    ),
]


@pytest.mark.parametrize(("data", "message"), GARBAGE)
def test_garbage_is_refused_before_anything_is_built_naming_entry_and_field(data, message):
    with pytest.raises(tb.BendingError, match=message):
        tb.BendingConfig.from_dict(data, source="bends.json")


def test_a_file_of_garbage_is_refused_with_the_same_words(tmp_path):
    path = tmp_path / "bends.json"
    base = json.dumps(_config({"class": "Scale", "args": {"scale": 2.0}}))
    for text, message in [
        ("[" * 100_000 + "]" * 100_000, "nest more than 32 levels deep"),
        (base.replace("2.0", "NaN"), "Scale: scale must be a finite number, got nan"),
        (base.replace("2.0", "1" * 5000), "is not valid JSON"),
        (base.replace("2.0", "1e999"), "Scale: scale must be a finite number, got inf"),
        (b"\xff\xfe", "not UTF-8"),
    ]:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        with pytest.raises(tb.BendingError, match=message):
            tb.BendingConfig.load(path)
    with pytest.raises(tb.BendingError, match="cannot read the bending configuration"):
        tb.BendingConfig.load(tmp_path)
    path.write_text(base)
    with pytest.raises(tb.BendingError, match=r"write allow=\['mymodule'\]"):
        tb.BendingConfig.load(path, allow="mymodule")


def test_what_to_dict_writes_the_schema_describes(tmp_path):
    from jsonschema import Draft202012Validator

    from torchbend.config.schema import SCHEMA

    Draft202012Validator.check_schema(SCHEMA)
    gain = tb.BendingParameter("gain", 0.5, range=(0.0, 1.0), clamp=True, ramp=4)
    seed = tb.BendingParameter("seed", 3)
    config = tb.BendingConfig(
        (tb.Mask(gain, dim=(-2,), seed=seed), "conv$"),
        (tb.Scale(2.0 * gain) >> tb.Bias(1 - gain) >> tb.Clamp(max=float("inf")), "out", "x"),
        (tb.Erode(3) >> tb.Noise(0.1, op="mul", seed=1), "conv.bias"),
        (tb.Quantize(None), "y"),
    )
    config.items[0].fn = ("forward",)
    path = tmp_path / "bends.json"
    config.save(path)
    assert tb.BendingConfig.load(path) == config


def _paths(value: object, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*path, i))
    return found


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["Scale", "Chain", "Mask", "control", "callback", "tuple", "k", "x"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["class", "args", "callbacks", "control", "callback", "tuple", "scale"])
            | st.text(max_size=4),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
KNOB = tb.BendingParameter("k", 0.5, range=(0.0, 1.0), widget=Widget(unit="Hz", group="g"))
VALID = tb.BendingConfig(
    (tb.Mask(KNOB, dim=(-2, -1), seed=0), "conv$"),
    (tb.Scale(2.0 * KNOB) >> tb.Bias(1 - KNOB) >> tb.Clamp(max=3.0), "out", "x"),
    (tb.Ablate(channels=[0, 1], seed=2) >> tb.Erode(3), "y"),
    (tb.Noise(0.1, seed=tb.BendingParameter("s", 1)), "z"),
).to_dict()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(_paths(VALID)), garbage=JSON)
def test_any_garbage_anywhere_raises_bending_errors_only(where, garbage):
    data = copy.deepcopy(VALID)
    if not where:
        data = garbage
    else:
        parent = data
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = garbage
    try:
        tb.BendingConfig.from_dict(data)
    except tb.BendingError:
        pass


@pytest.mark.parametrize("name", [".relative:X", "a..b:C", "os:", ":Scale", "Sc ale", "os:path:X"])
def test_callback_names_that_no_import_reads_are_refused_without_importing(name):
    from torchbend.callbacks import callback_from_name

    with pytest.raises(tb.BendingError, match=r"a callback's name is 'ClassName' or 'module\.path"):
        callback_from_name(name)  # imports=None: as the command line's --bend names them
