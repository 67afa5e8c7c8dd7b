"""Control metadata of exports: get_controls_json, the extra file, and the standalone reader."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.controls import Widget
from torchbend.errors import ExportError
from torchbend.export import nntilde, torchscript
from torchbend.export.reader import CONTROLS_FILE, read_controls, read_metadata

READER = Path(tb.__file__).parent / "export" / "reader.py"


def bended_model() -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Tanh()))
    bended.trace(input=torch.randn(1, 1, 64))
    cutoff = tb.BendingParameter(
        "cutoff",
        1.0,
        range=(0.5, 4.0),
        widget=Widget(unit="Hz", curve="log", label="Cut 'off' \"é\" \\ ☃", group="filter"),
    )
    std = tb.BendingParameter("std", 0.0, clamp=True, widget=Widget(step=0.01))
    shift = tb.BendingParameter("shift", 1, range=(0, 2), widget=Widget(choices=("a", "b", "c")))
    active = tb.BendingParameter("active", True)
    bended.bend(tb.Scale(cutoff), "_1$")
    bended.bend(tb.Noise(std=std, seed=None), "_0$")
    bended.bend(tb.Roll(shift) >> tb.Invert(active=active), "_0$")
    return bended


def expected_controls(bended: tb.BendedModule) -> list[dict]:
    controls = []
    for name, control in bended.controllables.items():
        described = control.describe()
        controls.append({**described, "setter": f"set_{name}", "getter": f"get_{name}"})
    return controls


def test_torchscript_files_carry_the_controls_metadata(tmp_path):
    bended = bended_model()
    path = tmp_path / "bent.pt"
    scripted = torchscript(bended, path)
    expected = expected_controls(bended)
    assert [c["name"] for c in expected] == ["cutoff", "std", "shift", "active"]
    metadata = json.loads(scripted.get_controls_json())
    assert metadata == {
        "format": "torchbend.controls",
        "version": 1,
        "getters": "value",
        "controls": expected,
    }
    cutoff, std, shift, active = metadata["controls"]
    assert cutoff["widget"]["label"] == "Cut 'off' \"é\" \\ ☃"  # read back as it was
    assert std["limits"] == [0.0, None] and std["clamp"] is True  # Noise.std >= 0
    assert shift["widget"]["kind"] == "menu" and shift["type"] == "int"
    assert active["widget"]["kind"] == "toggle" and active["value"] is True
    # The same JSON from a loaded module, from the extra file, and from the reader.
    loaded = torch.jit.load(str(path))
    assert loaded.get_controls_json() == scripted.get_controls_json()
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("/extra/" + CONTROLS_FILE)]
        assert json.loads(archive.read(name)) == metadata
    assert read_controls(path) == expected and read_metadata(path) == metadata
    # The names it gives are the module's setters and getters, which take the limits.
    assert getattr(loaded, cutoff["setter"])(8.0) == -1
    assert getattr(loaded, std["setter"])(-1.0) == 0 and getattr(loaded, std["getter"])() == 0.0


def test_nntilde_files_carry_the_controls_metadata(tmp_path):
    bended = bended_model()
    path = tmp_path / "bent.ts"
    nntilde(bended, path)
    metadata = read_metadata(path)
    assert metadata["getters"] == "tuple" and metadata["controls"] == expected_controls(bended)
    loaded = torch.jit.load(str(path))
    assert json.loads(loaded.get_controls_json()) == metadata
    assert loaded.get_attributes() == [c["name"] for c in metadata["controls"]]
    # A menu is an nn~ text attribute: its getter gives the entry's name (docs/export.md).
    assert getattr(loaded, metadata["controls"][2]["getter"])() == ("b",)


def test_the_value_is_the_one_at_export(tmp_path):
    bended = bended_model()
    bended.update("cutoff", 2.0)
    scripted = torchscript(bended)
    assert json.loads(scripted.get_controls_json())["controls"][0]["value"] == 2.0
    assert scripted.set_cutoff(3.0) == 0  # the metadata is a constant of the export
    assert json.loads(scripted.get_controls_json())["controls"][0]["value"] == 2.0


def test_a_model_without_controls_lists_none(tmp_path):
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 1, 1)))
    bended.trace(input=torch.randn(1, 1, 8))
    path = tmp_path / "plain.pt"
    torchscript(bended, path)
    assert read_controls(path) == []


def test_a_control_cannot_take_the_name_of_the_metadata_getter():
    bended = tb.BendedModule(nn.Sequential(nn.Tanh()))
    bended.trace(input=torch.randn(1, 1, 8))
    bended.bend(tb.Scale(tb.BendingParameter("controls_json", 1.0)), "_0$")
    with pytest.raises(ExportError, match="control 'controls_json' would have a getter"):
        torchscript(bended)


def test_the_reader_says_what_a_file_lacks(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match="is not a TorchScript file"):
        read_controls(text)
    plain = tmp_path / "plain.pt"
    torch.jit.save(torch.jit.script(nn.Tanh()), str(plain))
    with pytest.raises(ValueError, match="holds no torchbend controls metadata"):
        read_controls(plain)
    newer = tmp_path / "newer.pt"
    torch.jit.save(
        torch.jit.script(nn.Tanh()),
        str(newer),
        _extra_files={CONTROLS_FILE: json.dumps({"format": "torchbend.controls", "version": 9})},
    )
    with pytest.raises(ValueError, match="has version 9; this reader reads version 1"):
        read_controls(newer)


BLOCKED = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "torchbend", "numpy"):
            raise ImportError(f"{name} is blocked: the reader must not import it")
        return None

sys.meta_path.insert(0, Blocked())
"""


def test_the_reader_runs_alone_without_torch_or_torchbend(tmp_path):
    bended = bended_model()
    path = tmp_path / "bent.ts"
    nntilde(bended, path)
    copied = tmp_path / "host" / "reader.py"  # the file copied alone into a host's project
    copied.parent.mkdir()
    copied.write_text(READER.read_text())
    code = BLOCKED + textwrap.dedent(
        f"""
        import json, runpy
        namespace = runpy.run_path({str(copied)!r})
        print(json.dumps(namespace["read_controls"]({str(path)!r})))
        try:
            import torch
        except ImportError:
            pass
        else:
            raise SystemExit("torch was importable")
        """
    )
    # -I: no user site, no environment, no script folder; -S: no site-packages at all.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected_controls(bended)
