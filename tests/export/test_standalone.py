"""Exported files behave like Python: each bending mechanism, exported, loaded by a process that
cannot import torchbend, gives the bended module's outputs after the same control changes.

Every case is exported first (``tb.export.torchscript``, or ``tb.export.nntilde`` for the safety
stage), then the bended module (or its stream) is run in Python on a few inputs, with control
changes between calls, and its outputs saved. One subprocess, whose ``sys.meta_path`` refuses
``torchbend``, loads every file with ``torch.jit.load``, makes the same changes through the
files' ``set_<name>`` methods, runs them and prints one JSON line per case. Outputs must be
equal bit for bit: Python is deterministic on all of these (seeds, no autograd). Each case runs
five calls, so that the files run past TorchScript's profiling runs, on the graphs its executor
optimizes. The cases that do not match are strict xfails, whose reasons say what differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from export_models import Blowing
from torch import nn

import torchbend as tb
from torchbend.controls import Widget
from torchbend.errors import ExportError
from torchbend.export import nntilde, torchscript

pytestmark = pytest.mark.slow  # about 20 s: thirteen exports, and a process loading torch

CALLS = 5
"""Calls per case: past the profiling runs of TorchScript's executor (it optimizes after)."""


@dataclass
class Case:
    """A bended model to export, and the calls to make on it and on the file."""

    bended: tb.BendedModule
    updates: list[dict[str, float | int]]
    """Per call, the controls to change before it (``bended.update``, ``set_<name>``)."""
    length: int = 64
    nntilde: bool = False
    """Export with ``tb.export.nntilde(..., safety=True)``, and run Python through a
    ``Stream(..., safety=True)`` of one block per call."""
    metadata: bool = False
    """Check ``get_controls_json()`` and the file's extra file against the controls."""


def small(length: int = 64) -> tb.BendedModule:
    """Three convolutions with tanh between: activations ``_0`` to ``_4``, [1, 8, length]
    inside (``_1`` and ``_3`` are the tanh)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(1, 8, 3, padding=1),
        nn.Tanh(),
        nn.Conv1d(8, 8, 3, padding=1),
        nn.Tanh(),
        nn.Conv1d(8, 1, 3, padding=1),
    )
    bended = tb.BendedModule(model)
    bended.trace(input=torch.randn(1, 1, length))
    return bended


def control(name: str, value: float, low: float = 0.0, high: float = 1.0) -> tb.BendingParameter:
    return tb.BendingParameter(name, value, range=(low, high))


def blend() -> Case:
    bended = small()
    bended.bend(tb.SoftClip(4.0), "_1$", blend=0.3)
    bended.bend(tb.Scale(3.0), r"2\.weight", blend=0.25)
    return Case(bended, [{}] * CALLS)


def subset() -> Case:
    bended = small()
    bended.bend(tb.Scale(4.0), "_1$", subset=tb.Subset(0.25, dim=-2, seed=0))
    bended.bend(tb.Scale(-1.0), "_2$", subset=0.5)  # elements
    bended.bend(tb.Scale(0.0), r"4\.weight", subset=tb.Subset(0.5, dim=1, seed=3))
    return Case(bended, [{}] * CALLS)


def window() -> Case:
    bended = small()
    bended.bend(tb.Scale(3.0), "_1$", window=tb.Window(16, 48, fade=8))
    bended.bend(tb.Scale(-2.0), "_3$", window=tb.Window(1, 3, unit="calls"))  # calls 1 and 2
    bended.bend(tb.Scale(0.5), "_2$", window=tb.Window(100, 200, fade=20, stream=True))
    return Case(bended, [{}] * CALLS)


def guard() -> Case:
    bended = small()
    bended.bend(tb.Scale(50.0), "_2$", guard=True)
    bended.bend(tb.Scale(1e4), "_3$", guard=tb.Guard(std=2.0, norm=True))
    bended.guard = tb.Guard(std=1.5)  # the model's, for the bendings without their own
    bended.bend(tb.Scale(20.0), "_4$")
    return Case(bended, [{}] * CALLS)


def blend_control() -> Case:
    bended = small()
    bended.bend(tb.Scale(5.0), "_1$", blend=control("wet", 0.2))
    bended.bend(tb.Scale(-3.0), r"0\.weight", blend=control("weight_wet", 0.5))
    updates = [{}, {"wet": 0.7}, {"wet": 0.0, "weight_wet": 0.1}, {"wet": 1.0}, {"weight_wet": 1.0}]
    return Case(bended, updates)


def filter_() -> Case:
    bended = small()
    cutoff = control("cutoff", 0.1, 0.01, 0.5)
    bended.bend(tb.Filter("lowpass", cutoff=cutoff, resonance=2.0, carry=True), "_1$")
    bended.bend(tb.Filter("bandstop", cutoff=0.2, resonance=control("q", 1.0, 0.1, 10.0)), "_2$")
    updates = [{}, {}, {"cutoff": 0.3}, {"q": 5.0}, {"cutoff": 0.05}]
    return Case(bended, updates)


def reverse() -> Case:
    bended = small()
    block = tb.BendingParameter("block", 8, range=(1, 64))
    bended.bend(tb.Reverse(block=block), "_1$")
    bended.bend(tb.Reverse(), "_3$")
    return Case(bended, [{}, {"block": 5}, {}, {"block": 1}, {"block": 64}])


def unphase() -> Case:
    bended = small()
    bended.bend(tb.Unphase(shift=control("shift", 0.25), seed=0), "_1$")
    bended.bend(tb.Unphase(shift=0.5, seed=3, dim=-2), "_2$")
    return Case(bended, [{}, {"shift": 0.5}, {}, {"shift": 0.0}, {"shift": 1.0}])


def snapshot() -> Case:
    bended = small()
    saved = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1))
    snap = tb.Snapshot(amount=control("freeze", 0.5), saved={"forward:_1": saved})
    bended.bend(snap, "_1$")
    taken = tb.Snapshot(amount=0.75)
    bended.bend(taken, "_3$")
    with torch.no_grad(), taken.take():
        bended(torch.randn(1, 1, 64, generator=torch.Generator().manual_seed(2)))
    return Case(bended, [{}, {"freeze": 0.9}, {}, {"freeze": 0.0}, {"freeze": 1.0}])


def rewire() -> Case:
    bended = small()
    bended.bend(tb.Rewire("_1", amount=control("amount", 0.5)), "_3$")
    return Case(bended, [{}, {"amount": 1.0}, {}, {"amount": 0.0}, {"amount": 0.25}])


def widgets() -> Case:
    bended = small()
    gain = tb.BendingParameter(
        "gain",
        1.0,
        range=(0.5, 4.0),
        widget=Widget(unit="dB", curve="log", label="Gain 'é' ☃", group="out"),
    )
    steps = tb.BendingParameter("steps", 1, range=(0, 2), widget=Widget(choices=("a", "b", "c")))
    on = tb.BendingParameter("on", True)
    bended.bend(tb.Scale(gain), "_1$")
    bended.bend(tb.Roll(0.25 * steps), "_3$")  # a view: a quarter of the length a step
    bended.bend(tb.Invert(active=on), "_2$")
    updates = [{}, {"gain": 2.5}, {"steps": 2}, {"on": False}, {"gain": 0.5, "steps": 0}]
    return Case(bended, updates, metadata=True)


def safety() -> Case:
    torch.manual_seed(0)
    bended = tb.BendedModule(Blowing())
    bended.trace(x=torch.randn(1, 1, 256))
    bended.bend(tb.Scale(control("gain", 1e4, 0.0, 1e6)), "act$")
    updates = [{}, {}, {"gain": 1.0}, {}, {"gain": 100.0}]
    return Case(bended, updates, length=256, nntilde=True)


def shipped() -> Case:
    """The shipped model: an alias, a blend control and a window on its latent and decoder."""
    bended = tb.BendedModule(tb.models.load("tiny_rave"))
    bended.trace(x=torch.zeros(1, 1, 2048))
    bended.mark("latent", "encoder_2")
    bended.bend(tb.Filter("lowpass", cutoff=0.05), "#latent", blend=control("wet", 0.5))
    bended.bend(tb.Scale(2.0), "decoder_1$", window=tb.Window(32, 96, fade=8))
    return Case(bended, [{}, {"wet": 1.0}, {}, {"wet": 0.0}, {"wet": 0.25}], length=2048)


CASES: dict[str, Callable[[], Case]] = {
    "blend": blend,
    "subset": subset,
    "window": window,
    "guard": guard,
    "blend_control": blend_control,
    "filter": filter_,
    "reverse": reverse,
    "unphase": unphase,
    "snapshot": snapshot,
    "rewire": rewire,
    "widgets": widgets,
    "safety": safety,
    "shipped": shipped,
}


def expected_metadata(bended: tb.BendedModule) -> dict[str, Any]:
    controls = [
        {**c.describe(), "setter": f"set_{name}", "getter": f"get_{name}"}
        for name, c in bended.controllables.items()
    ]
    return {"format": "torchbend.controls", "version": 1, "getters": "value", "controls": controls}


def prepare(name: str, case: Case, folder: Path) -> dict[str, Any]:
    """Export ``case``, then run it in Python; what the subprocess needs to run it again."""
    path = folder / f"{name}.ts"
    metadata = expected_metadata(case.bended) if case.metadata else None
    if case.nntilde:
        nntilde(case.bended, path, safety=True)
        stream = tb.audio.Stream(case.bended, block_size=case.length, safety=True)
        run: Callable[[torch.Tensor], torch.Tensor] = stream.process_block
    else:
        torchscript(case.bended, path)
        run = case.bended
    generator = torch.Generator().manual_seed(sum(map(ord, name)))
    steps = []
    for updates in case.updates:
        x = 0.5 * torch.randn(2, 1, case.length, generator=generator)
        for control_name, value in updates.items():
            case.bended.update(control_name, value)
        with torch.no_grad():
            y = run(x)
        steps.append({"set": updates, "x": x, "y": y})
    data = folder / f"{name}.pt"
    torch.save({"steps": steps, "metadata": metadata}, data)
    return {"name": name, "file": str(path), "data": str(data)}


CHECK = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torchbend":
            raise ImportError(f"{name} is blocked: exported files must run without it")
        return None

sys.meta_path.insert(0, Blocked())

import json, zipfile
import torch

try:
    import torchbend
except ImportError:
    pass
else:
    raise SystemExit("torchbend was importable")

torch.manual_seed(12345)  # a file that drew from the global generator would show it
for case in json.loads(sys.argv[1]):
    result = {"name": case["name"], "calls": [], "error": None}
    try:
        module = torch.jit.load(case["file"])
        data = torch.load(case["data"])
        metadata = data["metadata"]
        if metadata is not None:
            text = module.get_controls_json()
            with zipfile.ZipFile(case["file"]) as archive:
                names = archive.namelist()
                (extra,) = [n for n in names if n.endswith("/extra/torchbend/controls.json")]
                stored = json.loads(archive.read(extra))
            result["metadata"] = json.loads(text) == metadata and stored == metadata
            setters = {c["name"]: c["setter"] for c in metadata["controls"]}
            getters = {c["name"]: c["getter"] for c in metadata["controls"]}
        for step in data["steps"]:
            statuses = {}
            for name, value in step["set"].items():
                if metadata is not None:
                    statuses[name] = getattr(module, setters[name])(value)
                    got = getattr(module, getters[name])()
                    statuses[name + " (get)"] = 0 if got == value else repr(got)
                else:
                    statuses[name] = getattr(module, "set_" + name)(value)
            with torch.no_grad():
                y = module(step["x"])
            expected = step["y"]
            same_shape = list(y.shape) == list(expected.shape)
            result["calls"].append({
                "statuses": statuses,
                "equal": bool(torch.equal(y, expected)),
                "max_diff": float((y - expected).abs().max()) if same_shape else None,
                "max_abs": float(y.abs().max()),
            })
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"[:2000]
    print(json.dumps(result), flush=True)
"""


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Export every case, run each in Python, then all the files in one subprocess."""
    folder = tmp_path_factory.mktemp("standalone")
    prepared, results = [], {}
    for name, build in CASES.items():
        try:
            prepared.append(prepare(name, build(), folder))
        except ExportError as e:
            results[name] = {"name": name, "export_error": str(e)}
    script = folder / "check.py"
    script.write_text(textwrap.dedent(CHECK))
    # -I: no user site or environment, and the script's folder (not the repository) on sys.path
    done = subprocess.run(
        [sys.executable, "-I", str(script), json.dumps(prepared)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        result = json.loads(line)
        results[result["name"]] = result
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_the_exported_file_gives_pythons_outputs(name, standalone):
    result = standalone[name]
    assert "export_error" not in result, result.get("export_error")
    assert result["error"] is None, result["error"]
    assert len(result["calls"]) == CALLS
    if "metadata" in result:
        assert result["metadata"], "get_controls_json() or the extra file differ from Python's"
    for i, call in enumerate(result["calls"]):
        assert all(s == 0 for s in call["statuses"].values()), (i, call["statuses"])
        assert call["equal"], f"call {i}: outputs differ by up to {call['max_diff']}"


def test_the_safety_stage_of_an_nntilde_file_is_pythons_to_rounding(standalone):
    """What the bit-for-bit case ``safety`` misses by (see its reason): within 1e-6, and the
    file's outputs within full scale though the bending blows the model up."""
    result = standalone["safety"]
    assert result.get("error") is None and len(result["calls"]) == CALLS, result
    for call in result["calls"]:
        assert call["max_diff"] <= 1e-6 and call["max_abs"] <= 1.0, call
