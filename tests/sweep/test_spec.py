"""Sweep specifications: what they mean (points, values, jobs) and every way they can be wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import torchbend as tb
from torchbend.errors import SweepError
from torchbend.sweep.run import load

from .sweeps import SOUNDS, small_spec

NOISE_BASE = {
    "bendings": [{"callback": {"class": "Noise", "args": {"std": 0.1}}, "patterns": ["decoder_1"]}]
}


def spec_with(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": "tiny_rave", "inputs": str(SOUNDS / "bass.wav")}
    spec.update(changes)
    return {k: v for k, v in spec.items() if v is not None}


# (changes to a valid specification, words the error must hold)
GARBAGE: list[tuple[dict[str, Any], list[str]]] = [
    ({"modle": "x"}, ["unknown field 'modle'", "did you mean 'model'"]),
    ({"model": None}, ["missing field 'model'"]),
    ({"model": 3}, ["model", "as a string", "3"]),
    ({"inputs": []}, ["inputs", "non-empty list"]),
    ({"inputs": [1]}, ["inputs", "[1]"]),
    ({"block_size": -1}, ["block_size", "positive number of samples", "-1"]),
    ({"sample": "grud"}, ["sample", "'grid' or 'random'", '"grud"']),
    ({"sample": "random"}, ["random sampling needs 'count'"]),
    ({"count": 0}, ["count", "positive number of renders"]),
    ({"seed": "x"}, ["seed", "integer"]),
    ({"format": "mp3"}, ["format", "'wav' or 'flac'"]),
    ({"threads": 0}, ["threads", "positive integer"]),
    ({"safety": "yes"}, ["safety", "true or false"]),
    ({"base": 3}, ["base", "bending configuration"]),
    ({"base": "missing.json"}, ["base", "no bending configuration file 'missing.json'"]),
    (
        {"base": {"bendings": [{"callback": {"class": "Nosie", "args": {}}, "patterns": ["a"]}]}},
        ["base", "Nosie"],
    ),
    ({"axes": []}, ["axes", "object of axes by path"]),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std": 3}},
        ["axis", "expected an object"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std": {"values": [1], "seeds": 2}}},
        ["exactly one of"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std": {"values": [1], "steps": 2}}},
        ["'steps' does not go with 'values'"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std": {"values": []}}},
        ["non-empty list"],
    ),
    (
        {
            "base": NOISE_BASE,
            "axes": {"bendings.0.callback.args.std": {"range": [1, 0], "steps": 2}},
        },
        ["range", "low <= high", "[1, 0]"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std": {"range": [0, 1]}}},
        ["needs 'steps' on a grid"],
    ),
    (
        {
            "base": NOISE_BASE,
            "axes": {"bendings.0.callback.args.std": {"range": [0, 1], "steps": 2, "log": True}},
        },
        ["log range needs low > 0"],
    ),
    ({"base": NOISE_BASE, "axes": {"bendings.0.callback.args.seed": {"seeds": 0}}}, ["seeds"]),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.patterns": {"targets": "layers"}}},
        ["targets", "activations, weights, all"],
    ),
    (
        {
            "base": NOISE_BASE,
            "axes": {"bendings.0.patterns": {"targets": "weights", "pattern": "("}},
        },
        ["not a regular expression"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.callback.args.std.x": {"values": [1]}}},
        ["bendings.0.callback.args.std", "not an object"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.1.callback.args.std": {"values": [1]}}},
        ["holds 1 item(s)", "bendings.1 does not exist"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"bendings.0.calback.args.std": {"values": [1]}}},
        ["no bendings.0.calback", "did you mean 'callback'"],
    ),
    (
        {"base": NOISE_BASE, "axes": {"controls.gain.value": {"values": [1]}}},
        ["no controls"],
    ),
    ({"axes": {"a..b": {"values": [1]}}}, ["path of fields"]),
]


@pytest.mark.parametrize("changes, words", GARBAGE)
def test_bad_specifications_name_the_field_and_what_is_expected(
    changes: dict[str, Any], words: list[str], tmp_path: Path
) -> None:
    spec = spec_with(**changes)
    with pytest.raises(SweepError) as caught:
        tb.sweep.read_spec(spec, root=tmp_path)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_a_control_axis_finds_the_control_by_name() -> None:
    base = {
        "controls": [{"name": "gain", "value": 1.0, "range": [0.0, 4.0]}],
        "bendings": [
            {
                "callback": {"class": "Scale", "args": {"scale": {"control": "gain"}}},
                "patterns": ["decoder_1"],
            }
        ],
    }
    spec = tb.sweep.read_spec(
        spec_with(base=base, axes={"controls.gain.value": {"values": [0.5, 2.0]}})
    )
    sweep = load(spec)
    configs = [job.config for job in sweep.jobs()]
    assert [c["controls"][0]["value"] for c in configs] == [0.5, 2.0]
    with pytest.raises(SweepError, match=r"no item named 'gian'.*did you mean 'gain'"):
        tb.sweep.read_spec(spec_with(base=base, axes={"controls.gian.value": {"values": [1]}}))


def test_specification_files_json_and_yaml(tmp_path: Path) -> None:
    spec = spec_with(inputs="sounds/*.wav")
    (tmp_path / "sounds").mkdir()
    (tmp_path / "sounds" / "a.wav").write_bytes((SOUNDS / "bass.wav").read_bytes())
    (tmp_path / "s.json").write_text(json.dumps(spec))
    yaml = pytest.importorskip("yaml")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    for name in ("s.json", "s.yaml"):
        read = tb.sweep.read_spec(tmp_path / name)
        assert read.input_files() == [(tmp_path / "sounds" / "a.wav").resolve()]  # relative
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SweepError, match=r"bad.json is not valid JSON"):
        tb.sweep.read_spec(tmp_path / "bad.json")
    (tmp_path / "bad.yaml").write_text("a: [")
    with pytest.raises(SweepError, match=r"bad.yaml is not valid YAML"):
        tb.sweep.read_spec(tmp_path / "bad.yaml")
    (tmp_path / "s.txt").write_text("{}")
    with pytest.raises(SweepError, match=r"a \.json, \.yaml or \.yml file"):
        tb.sweep.read_spec(tmp_path / "s.txt")
    with pytest.raises(SweepError, match=r"no sweep specification"):
        tb.sweep.read_spec(tmp_path / "none.json")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(SweepError, match=r"must be an object of fields"):
        tb.sweep.read_spec(tmp_path / "list.json")


def test_specifications_nested_too_deep_are_one_line_errors(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000  # Python's own parser raises RecursionError on this
    (tmp_path / "deep.json").write_text(deep)
    with pytest.raises(SweepError, match=r"deep.json: lists and objects nest more than \d+"):
        tb.sweep.read_spec(tmp_path / "deep.json")
    (tmp_path / "base.json").write_text('{"bendings": ' + deep + "}")
    (tmp_path / "s.json").write_text(json.dumps(spec_with(base="base.json")))
    with pytest.raises(SweepError, match=r"base: base.json: lists and objects nest more"):
        tb.sweep.read_spec(tmp_path / "s.json")


def test_inputs_that_name_no_audio_say_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for inputs, words in [
        ("*.flac", "matches no audio file"),
        ("empty", "holds no audio file"),
        ("notes.txt", "is not an audio file"),
        ("nowhere.wav", "no file or folder 'nowhere.wav'"),
    ]:
        spec = tb.sweep.read_spec(spec_with(inputs=inputs), root=tmp_path)
        with pytest.raises(SweepError, match=words):
            spec.input_files()


def test_grid_points_vary_the_last_axis_fastest_and_jobs_go_over_every_input() -> None:
    sweep = load(tb.sweep.read_spec(small_spec()))
    assert (sweep.points, sweep.renders) == (4, 12)
    jobs = list(sweep.jobs())
    assert [j.id for j in jobs[:4]] == [
        "00000-00-bass",
        "00000-01-drums",
        "00000-02-pad",
        "00001-00-bass",
    ]
    values = [sweep.values(p) for p in range(4)]
    assert values == [
        {"bendings.0.callback.args.std": 0.05, "bendings.0.patterns": "decoder_0"},
        {"bendings.0.callback.args.std": 0.05, "bendings.0.patterns": "decoder_1"},
        {"bendings.0.callback.args.std": 0.3, "bendings.0.patterns": "decoder_0"},
        {"bendings.0.callback.args.std": 0.3, "bendings.0.patterns": "decoder_1"},
    ]
    assert jobs[3].config["bendings"][0]["patterns"] == ["^decoder_1$"]
    assert jobs[3].config["bendings"][0]["callback"]["args"] == {"std": 0.05, "seed": 0}
    assert tb.sweep.row_config({"id": "x", "config": jobs[3].config}) == tb.BendingConfig(
        (tb.Noise(0.05, seed=0), "^decoder_1$")
    )


def test_ranges_seeds_and_random_sampling() -> None:
    axes = {
        "bendings.0.callback.args.std": {"range": [0.01, 1.0], "steps": 3, "log": True},
        "bendings.0.callback.args.seed": {"seeds": 2, "start": 5},
    }
    sweep = load(tb.sweep.read_spec(spec_with(base=NOISE_BASE, axes=axes)))
    assert sweep.axes[0].grid() == pytest.approx([0.01, 0.1, 1.0])
    assert sweep.axes[1].grid() == [5, 6]
    assert sweep.renders == 6
    random_axes = {
        "bendings.0.callback.args.std": {"range": [0.0, 0.5]},
        "bendings.0.callback.args.seed": {"range": [0, 1000], "integer": True},
    }
    small = load(
        tb.sweep.read_spec(
            spec_with(base=NOISE_BASE, axes=random_axes, sample="random", count=5, seed=3)
        )
    )
    large = load(
        tb.sweep.read_spec(
            spec_with(base=NOISE_BASE, axes=random_axes, sample="random", count=9, seed=3)
        )
    )
    other = load(
        tb.sweep.read_spec(
            spec_with(base=NOISE_BASE, axes=random_axes, sample="random", count=5, seed=4)
        )
    )
    firsts = [small.values(p) for p in range(5)]
    assert firsts == [large.values(p) for p in range(5)]  # a larger count keeps the points
    assert firsts != [other.values(p) for p in range(5)]
    assert all(0.0 <= v["bendings.0.callback.args.std"] <= 0.5 for v in firsts)
    assert all(isinstance(v["bendings.0.callback.args.seed"], int) for v in firsts)
    assert len({v["bendings.0.callback.args.std"] for v in firsts}) == 5
    assert len(list(large.jobs())) == 9


def test_random_sampling_over_several_inputs_makes_exactly_count_renders() -> None:
    spec = small_spec(sample="random", count=7)
    spec["axes"]["bendings.0.callback.args.std"] = {"range": [0.0, 0.5]}
    sweep = load(tb.sweep.read_spec(spec))
    jobs = list(sweep.jobs())
    assert (sweep.points, len(jobs)) == (3, 7)
    assert jobs[-1].id == "00002-00-bass"


def test_targets_axes_over_weights_and_over_everything() -> None:
    base = {
        "bendings": [
            {"callback": {"class": "Scale", "args": {"scale": 0.5}}, "patterns": ["decoder_1"]}
        ]
    }
    bended = tb.BendedModule(tb.models.load("tiny_rave"))
    for kind, expected in [
        ("weights", [n for n in bended.weight_names if n.startswith("decoder.")]),
        (
            "all",
            ["decoder_0", "decoder_1", "decoder_2"]
            + [n for n in bended.weight_names if n.startswith("decoder.")],
        ),
    ]:
        axes = {"bendings.0.patterns.0": {"targets": kind, "pattern": "^decoder[._]"}}
        sweep = load(tb.sweep.read_spec(spec_with(base=base, axes=axes)))
        assert list(sweep.axes[0].values) == expected and expected
        jobs = list(sweep.jobs())
        assert [j.config["bendings"][0]["patterns"] for j in jobs] == [
            ["^" + re.escape(name) + "$"] for name in expected
        ]


def test_what_needs_the_model_is_checked_before_any_render() -> None:
    targets = small_spec()
    targets["axes"]["bendings.0.patterns"]["pattern"] = "^nothing"
    with pytest.raises(SweepError, match=r"matches none of the .* activations of forward"):
        load(tb.sweep.read_spec(targets))
    refused = small_spec()
    refused["axes"]["bendings.0.callback.args.std"] = {"values": [0.1, -1.0]}
    with pytest.raises(
        SweepError, match=r"'bendings.0.callback.args.std' = -1.0: the bending fails"
    ):
        load(tb.sweep.read_spec(refused))
    with pytest.raises(SweepError, match=r"the grid makes 4 point.* = 12 renders: remove count"):
        load(tb.sweep.read_spec(small_spec(count=500)))
    with pytest.raises(tb.TorchbendError, match=r"cannot import 'nowhere:make'"):
        load(tb.sweep.read_spec(small_spec(model="nowhere:make")))
    with pytest.raises(tb.TorchbendError, match=r"checkpoint needs MODEL as module:factory"):
        load(tb.sweep.read_spec(small_spec(checkpoint="w.pt")))


def test_an_axis_gives_any_value_of_its_grid_without_listing_it() -> None:
    axes = {
        "bendings.0.callback.args.std": {"range": [0.01, 1.0], "steps": 5, "log": True},
        "bendings.0.callback.args.seed": {"seeds": 4, "start": 7},
    }
    spec = tb.sweep.read_spec(spec_with(base=NOISE_BASE, axes=axes))
    for axis in spec.axes:
        assert axis.size == len(axis.grid())
        assert [axis.value(i) for i in range(axis.size)] == axis.grid()
    huge = tb.sweep.read_spec(
        spec_with(
            base=NOISE_BASE,
            axes={"bendings.0.callback.args.std": {"range": [0.0, 1.0], "steps": 1_000_001}},
            sample="random",
            count=3,
        )
    ).axes[0]
    assert huge.size == 1_000_001  # counted, not listed
    assert (huge.value(0), huge.value(500_000), huge.value(1_000_000)) == (0.0, 0.5, 1.0)
    assert huge.probes() == [0.0, 1.0]  # the ends bound every value between


# (axes, sampling changes, the size the error must name)
TOO_LARGE: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({"bendings.0.callback.args.std": {"range": [0, 1], "steps": 10**8}}, {}, "100,000,000"),
    (
        {
            "bendings.0.callback.args.std": {"values": [0.1 * i for i in range(1001)]},
            "bendings.0.callback.args.seed": {"seeds": 10**12},
        },
        {},
        "1,001,000,000,000,000",
    ),
    (
        {"bendings.0.callback.args.std": {"range": [0, 1]}},
        {"sample": "random", "count": 2 * 10**6},
        "2,000,000",
    ),
]


@pytest.mark.parametrize("axes, sampling, size", TOO_LARGE)
def test_a_space_too_large_is_refused_at_once_naming_its_size_and_the_limit(
    axes: dict[str, Any], sampling: dict[str, Any], size: str
) -> None:
    with pytest.raises(SweepError) as caught:
        tb.sweep.read_spec(spec_with(base=NOISE_BASE, axes=axes, **sampling))
    message = str(caught.value)
    assert size in message and "1,000,000" in message and "\n" not in message
    assert ("axis 'bendings.0.callback.args.seed'" in message) == ("seeds" in str(axes))


def test_the_size_counts_the_inputs_before_the_model_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torchbend.sweep.space as space

    def no_model(*args: Any) -> Any:
        raise AssertionError("the model was loaded before the size was checked")

    monkeypatch.setattr(space, "load_bended", no_model)
    spec = small_spec()  # three inputs
    spec["axes"] = {"bendings.0.callback.args.std": {"range": [0, 1], "steps": 400_000}}
    read = tb.sweep.read_spec(spec)  # 400,000 points are allowed for one input...
    with pytest.raises(SweepError, match=r"400,000 point\(s\) x 3 input\(s\) = 1,200,000 renders"):
        load(read)  # ...not for three
